//! The JSON reader: each top-level value is split into raw item slices without building a value
//! tree, each item's apiVersion/kind is peeked from its first bytes, and items are decoded straight
//! into typed objects in parallel, kind by kind. When any fails, the first failure in file order is
//! decoded again sequentially to report its field path and position.

use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use rayon::prelude::*;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::Prune;
use super::documents::skip_separators;
use super::error::{
    DecodeError, Format, LoadError, LoadReport, Location, display_name, line_column, strip_position,
};
use super::kind::{ObjectKind, Resolved, list_element_type, resolve_kind};
use super::shape::{Shape, decode_shaped, shapes};
use crate::snapshot::{ClusterObjects, PodDetail, PodPlace};

/// A top-level JSON value, read without decoding its items.
#[derive(Deserialize)]
struct JsonDoc<'a> {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
    /// A List's recorded Kubernetes version ([`super::KUBE_VERSION_KEY`]); any JSON value, so that an
    /// odd one is ignored rather than refused.
    #[serde(rename = "kubeVersion", default)]
    kube_version: Option<serde_json::Value>,
}

/// The envelope of a List without its items (the streaming reader's header): only its recorded
/// version is read.
#[derive(Deserialize)]
pub(super) struct ListEnvelope {
    #[serde(rename = "kubeVersion", default)]
    kube_version: Option<serde_json::Value>,
}

impl ListEnvelope {
    /// The recorded version, when it is a string.
    pub(super) fn kube_version(&self) -> Option<&str> {
        self.kube_version.as_ref().and_then(serde_json::Value::as_str)
    }
}

/// One object's text, with its place in the file.
#[derive(Clone, Copy)]
pub(super) struct RawItem<'a> {
    pub(super) document: usize,
    pub(super) item: Option<usize>,
    pub(super) text: &'a str,
    pub(super) kind: ObjectKind,
}

/// Decodes one JSON item (the fields `shape` skips at parser speed) and prunes it.
fn decode_json_item<T>(item: &RawItem<'_>, shape: Shape) -> Result<T, ()>
where
    T: serde::de::DeserializeOwned + Prune,
{
    let mut de = serde_json::Deserializer::from_str(item.text);
    let mut o: T = decode_shaped(&mut de, shape).map_err(drop)?;
    de.end().map_err(drop)?;
    o.prune();
    Ok(o)
}

pub(super) fn decode_json_items<T>(items: &[RawItem<'_>], shape: Shape) -> Result<Vec<T>, ()>
where
    T: serde::de::DeserializeOwned + Prune + Send,
{
    items
        .par_iter()
        .with_min_len(32)
        .map(|it| decode_json_item(it, shape))
        .collect()
}

/// Decodes JSON pods in parallel, each placed as `detail` says as soon as it is decoded (see
/// [`PodDetail::place`]), appending to `objects.pods` and `objects.placed_pods` in order.
pub(super) fn decode_json_pods(
    items: &[RawItem<'_>],
    detail: &PodDetail,
    objects: &mut ClusterObjects,
) -> Result<(), ()> {
    let places: Vec<PodPlace> = items
        .par_iter()
        .with_min_len(32)
        .map(|it| {
            // A pod with a malformed quantity must not be reduced to facts that count it as 0: failing
            // makes the caller read the file again exactly, which reports it.
            let pod = decode_json_item::<Pod>(it, shapes::POD)?;
            super::quantities::check_pod(&pod).map_err(drop)?;
            Ok(detail.place(pod))
        })
        .collect::<Result<_, ()>>()?;
    PodPlace::push_all(places, &mut objects.pods, &mut objects.placed_pods);
    Ok(())
}

/// Reads only `apiVersion` and `kind` of an item, stopping as soon as both are seen (they come first
/// in kubectl's output, so this touches a few bytes of each item).
#[derive(Default)]
pub(super) struct TypePeek {
    pub(super) api_version: Option<String>,
    pub(super) kind: Option<String>,
    pub(super) not_an_object: bool,
}

const PEEK_DONE: &str = "\u{0}peek done";

enum PeekKey {
    ApiVersion,
    Kind,
    Other,
}

impl<'de> Deserialize<'de> for PeekKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = PeekKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PeekKey, E> {
                Ok(match v {
                    "apiVersion" => PeekKey::ApiVersion,
                    "kind" => PeekKey::Kind,
                    _ => PeekKey::Other,
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

struct PeekVisitor<'p>(&'p mut TypePeek);

impl<'de> Visitor<'de> for PeekVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<PeekKey>()? {
            match key {
                PeekKey::ApiVersion => self.0.api_version = map.next_value::<Option<String>>()?,
                PeekKey::Kind => self.0.kind = map.next_value::<Option<String>>()?,
                PeekKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if self.0.api_version.is_some() && self.0.kind.is_some() {
                return Err(de::Error::custom(PEEK_DONE));
            }
        }
        Ok(())
    }
}

/// `Err(message)` when the item is not an object or its apiVersion/kind are not strings.
pub(super) fn peek_json(text: &str) -> Result<TypePeek, String> {
    let mut peek = TypePeek::default();
    let mut de = serde_json::Deserializer::from_str(text);
    match de.deserialize_map(PeekVisitor(&mut peek)) {
        Ok(()) => Ok(peek),
        Err(_) if peek.api_version.is_some() && peek.kind.is_some() => Ok(peek),
        Err(e) if e.is_data() => {
            let message = strip_position(&e.to_string());
            if text.trim_start().starts_with('{') {
                Err(message)
            } else {
                peek.not_an_object = true;
                Ok(peek)
            }
        }
        Err(e) => Err(strip_position(&e.to_string())),
    }
}

#[derive(Deserialize, Default)]
struct NameProbe {
    #[serde(default)]
    metadata: Option<NameProbeMeta>,
}

#[derive(Deserialize, Default)]
struct NameProbeMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

fn json_name(text: &str) -> Option<String> {
    let probe: NameProbe = serde_json::from_str(text).ok()?;
    let meta = probe.metadata?;
    display_name(meta.namespace.as_deref(), meta.name.as_deref())
}

fn offset_in(outer: &str, inner: &str) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}

/// Absolute position of an error reported at (line, column) within `inner`.
fn absolute_position(outer: &str, inner: &str, line: usize, column: usize) -> (usize, usize) {
    let (base_line, base_column) = line_column(outer.as_bytes(), offset_in(outer, inner));
    if line <= 1 {
        (base_line, base_column + column.saturating_sub(1))
    } else {
        (base_line + line - 1, column)
    }
}

pub(super) fn load_json(text: &str, path: &Path) -> Result<(ClusterObjects, LoadReport), LoadError> {
    let mut report = LoadReport::new(Format::Json);
    let mut buckets: Vec<Vec<RawItem<'_>>> = vec![Vec::new(); ObjectKind::ALL.len()];
    let shape = |at: Location, message: String| LoadError::Shape {
        path: path.to_path_buf(),
        at,
        message,
    };

    // One value after another, past the `---`/`...` and comment lines a YAML stream of JSON documents
    // puts between them (kubectl reads such a file as YAML; its documents are JSON all the same).
    let mut rest = skip_separators(text);
    let mut document = 0;
    while !rest.is_empty() {
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<JsonDoc<'_>>();
        let start = offset_in(text, rest);
        let doc = match stream.next() {
            None => break,
            Some(Ok(doc)) => doc,
            Some(Err(e)) => {
                let (line, column) = if e.line() == 0 {
                    (None, None)
                } else {
                    let (line, column) = absolute_position(text, rest, e.line(), e.column());
                    (Some(line), Some(column))
                };
                let at = Location {
                    document,
                    item: None,
                    line,
                    column,
                };
                let message = strip_position(&e.to_string());
                return Err(if e.is_data() {
                    shape(at, format!("not a Kubernetes object or List: {message}"))
                } else {
                    LoadError::Syntax {
                        path: path.to_path_buf(),
                        format: Format::Json,
                        at,
                        message,
                    }
                });
            }
        };
        let end = start + stream.byte_offset();
        rest = skip_separators(&rest[stream.byte_offset()..]);
        report.documents += 1;
        let api_version = doc.api_version.as_deref();
        let kind = doc.kind.as_deref();
        if let Some(items) = doc.items {
            report.record_version(doc.kube_version.as_ref().and_then(serde_json::Value::as_str));
            let default = list_element_type(api_version, kind);
            for (i, raw) in items.into_iter().enumerate() {
                let item_text = raw.get();
                let at = || Location {
                    document,
                    item: Some(i),
                    line: Some(line_column(text.as_bytes(), offset_in(text, item_text)).0),
                    column: None,
                };
                let peek = peek_json(item_text).map_err(|m| shape(at(), m))?;
                if peek.not_an_object {
                    return Err(shape(at(), "list item is not an object".into()));
                }
                match resolve_kind(peek.api_version.as_deref(), peek.kind.as_deref(), default) {
                    Resolved::Known(k) => buckets[k.index()].push(RawItem {
                        document,
                        item: Some(i),
                        text: item_text,
                        kind: k,
                    }),
                    Resolved::Skip => report.skip(
                        peek.api_version.as_deref().or(default.map(|d| d.0)),
                        peek.kind.as_deref().or(default.map(|d| d.1)).unwrap_or(""),
                    ),
                    Resolved::NoKind => return Err(shape(at(), "list item has no kind".into())),
                }
            }
        } else {
            let doc_text = &text[start..end];
            let at = Location {
                document,
                item: None,
                line: Some(line_column(text.as_bytes(), start + leading_ws(doc_text)).0),
                column: None,
            };
            match resolve_kind(api_version, kind, None) {
                Resolved::Known(k) => buckets[k.index()].push(RawItem {
                    document,
                    item: None,
                    text: doc_text,
                    kind: k,
                }),
                Resolved::Skip => report.skip(api_version, kind.unwrap_or("")),
                Resolved::NoKind => return Err(shape(at, "object has no kind".into())),
            }
        }
        document += 1;
    }

    let mut objects = ClusterObjects::default();
    let mut failed = false;
    for kind in ObjectKind::ALL {
        let items = &buckets[kind.index()];
        if !items.is_empty() && kind.decode_json(items, &mut objects).is_err() {
            failed = true;
            break;
        }
    }
    if failed {
        return Err(first_json_error(text, path, &buckets));
    }
    report.objects = objects.len();
    Ok((objects, report))
}

fn leading_ws(s: &str) -> usize {
    s.len() - s.trim_start().len()
}

/// The first item in file order that does not decode, with its field path and position.
fn first_json_error(text: &str, path: &Path, buckets: &[Vec<RawItem<'_>>]) -> LoadError {
    let mut all: Vec<&RawItem<'_>> = buckets.iter().flatten().collect();
    all.sort_by_key(|it| offset_in(text, it.text));
    for it in all {
        let Err(e) = it.kind.check_json(it.text) else {
            continue;
        };
        let field_path = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = absolute_position(text, it.text, inner.line(), inner.column());
        let message = strip_position(&inner.to_string());
        let message = if field_path.is_empty() || field_path == "." {
            message
        } else {
            format!("{field_path}: {message}")
        };
        return LoadError::Decode(Box::new(DecodeError {
            path: path.to_path_buf(),
            at: Location {
                document: it.document,
                item: it.item,
                line: Some(line),
                column: Some(column),
            },
            api_version: it.kind.api_version().to_string(),
            kind: it.kind.kind().to_string(),
            name: json_name(it.text),
            message,
        }));
    }
    // Parallel decoding failed but sequential decoding did not: cannot happen with a deterministic
    // decoder, but report something useful rather than panic.
    LoadError::Shape {
        path: path.to_path_buf(),
        at: Location::default(),
        message: "an object failed to decode".into(),
    }
}

/// What a list response from the API server says besides its items.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ListPageMeta {
    /// `metadata.continue`: the token for the next page, `None` on the last.
    pub continue_token: Option<String>,
    /// `metadata.resourceVersion`: the version the list was served at.
    pub resource_version: Option<String>,
}

/// A list response: its metadata, and its items as raw slices (not decoded).
#[derive(Deserialize)]
struct ApiListPage<'a> {
    #[serde(default)]
    metadata: ApiListMeta,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

/// A list response's `metadata` as the API server writes it.
#[derive(Deserialize, Default)]
pub(crate) struct ApiListMeta {
    #[serde(rename = "continue", default)]
    pub(crate) continue_token: Option<String>,
    #[serde(rename = "resourceVersion", default)]
    pub(crate) resource_version: Option<String>,
}

/// A list page that does not decode: the kind, the item's name when known, and what failed.
#[derive(Debug, thiserror::Error)]
#[error("{kind} list from the API server{}: {message}", .name.as_deref().map(|n| format!(", item {n}")).unwrap_or_default())]
pub struct PageError {
    /// The kind listed.
    pub kind: &'static str,
    /// The failing item's `namespace/name`, when it has one.
    pub name: Option<String>,
    /// The decoder's message, with the field path.
    pub message: String,
}

/// Decodes one page of a list response from the API server into `objects` (appending), the same way
/// a snapshot file's items are decoded: only the fields scheduling reads, in parallel, pods placed as
/// `detail` says as soon as each is decoded. List items carry no apiVersion/kind: `kind` says what
/// they are. Returns the page's metadata (its continue token).
pub fn decode_list_page(
    kind: ObjectKind,
    text: &str,
    detail: &PodDetail,
    objects: &mut ClusterObjects,
) -> Result<ListPageMeta, PageError> {
    let error = |name: Option<String>, message: String| PageError {
        kind: kind.kind(),
        name,
        message,
    };
    let page: ApiListPage<'_> =
        serde_json::from_str(text).map_err(|e| error(None, format!("not a list: {e}")))?;
    let items: Vec<RawItem<'_>> = page
        .items
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, raw)| RawItem {
            document: 0,
            item: Some(i),
            text: raw.get(),
            kind,
        })
        .collect();
    let decoded = if kind == ObjectKind::Pod {
        decode_json_pods(&items, detail, objects)
    } else {
        kind.decode_json(&items, objects)
    };
    if decoded.is_err() {
        // The first item that fails, decoded again alone for its field path.
        for item in &items {
            if let Err(e) = kind.check_json(item.text) {
                let field_path = e.path().to_string();
                let message = strip_position(&e.into_inner().to_string());
                return Err(error(json_name(item.text), format!("{field_path}: {message}")));
            }
            if kind == ObjectKind::Pod
                && let Ok(pod) = serde_json::from_str::<Pod>(item.text)
                && let Err(bad) = super::quantities::check_pod(&pod)
            {
                return Err(error(json_name(item.text), bad.to_string()));
            }
        }
        return Err(error(None, "an item failed to decode".into()));
    }
    Ok(ListPageMeta {
        continue_token: page.metadata.continue_token.filter(|t| !t.is_empty()),
        resource_version: page.metadata.resource_version,
    })
}
