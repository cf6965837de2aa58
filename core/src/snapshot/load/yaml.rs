//! The YAML reader: one small value tree per item, converted to its typed object and pruned, one
//! document after another (yaml_serde has no borrowed raw values, so large snapshots should be
//! JSON). Items of a typed list without their own kind wait for the list's kind. A failing object is
//! read again straight from the text to learn its line, column and field path.

use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::error::{DecodeError, Format, LoadError, LoadReport, Location, display_name, strip_position};
use super::kind::{ObjectKind, Resolved, list_element_type, resolve_kind};
use crate::snapshot::ClusterObjects;

/// A failure inside the document visitor, carried out past serde's error type.
struct ItemFailure {
    item: Option<usize>,
    kind: ObjectKind,
    name: Option<String>,
    message: String,
}

struct YamlState<'s> {
    objects: &'s mut ClusterObjects,
    report: &'s mut LoadReport,
    failure: Option<ItemFailure>,
    shape: Option<(Option<usize>, String)>,
    /// Items without a kind, resolved against the list's kind once the document is read.
    pending: Vec<(usize, yaml_serde::Value)>,
}

/// What remains of a document once its items are stored.
#[derive(Default)]
struct YamlDoc {
    api_version: Option<String>,
    kind: Option<String>,
    had_items: bool,
    /// A List's recorded Kubernetes version ([`super::KUBE_VERSION_KEY`]), when a string.
    kube_version: Option<String>,
    /// Every field but `items` (the object itself when the document is not a List).
    rest: yaml_serde::Mapping,
}

const YAML_ABORT: &str = "\u{0}abort";

fn yaml_str<'v>(v: &'v yaml_serde::Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(yaml_serde::Value::as_str)
}

fn yaml_name(v: &yaml_serde::Value) -> Option<String> {
    let meta = v.get("metadata")?;
    display_name(yaml_str(meta, "namespace"), yaml_str(meta, "name"))
}

impl YamlState<'_> {
    /// Stores one object; `Err` (with `failure`/`shape` set) aborts the document.
    fn store(
        &mut self,
        item: Option<usize>,
        value: yaml_serde::Value,
        default: Option<(&str, &str)>,
    ) -> Result<(), ()> {
        if !value.is_mapping() {
            let what = if item.is_some() { "list item" } else { "document" };
            self.shape = Some((item, format!("{what} is not an object")));
            return Err(());
        }
        let api_version = yaml_str(&value, "apiVersion").map(str::to_string);
        let kind = yaml_str(&value, "kind").map(str::to_string);
        match resolve_kind(api_version.as_deref(), kind.as_deref(), default) {
            Resolved::Known(k) => {
                let name = yaml_name(&value);
                k.store_yaml(value, self.objects).map_err(|e| {
                    self.failure = Some(ItemFailure {
                        item,
                        kind: k,
                        name,
                        message: strip_position(&e.to_string()),
                    });
                })
            }
            Resolved::Skip => {
                self.report.skip(
                    api_version.as_deref().or(default.map(|d| d.0)),
                    kind.as_deref().or(default.map(|d| d.1)).unwrap_or(""),
                );
                Ok(())
            }
            Resolved::NoKind => {
                let what = if item.is_some() { "list item" } else { "object" };
                self.shape = Some((item, format!("{what} has no kind")));
                Err(())
            }
        }
    }
}

struct YamlDocVisitor<'a, 's>(&'a mut YamlState<'s>);

impl<'de> Visitor<'de> for YamlDocVisitor<'_, '_> {
    type Value = YamlDoc;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object or List")
    }

    fn visit_unit<E: de::Error>(self) -> Result<YamlDoc, E> {
        Ok(YamlDoc::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<YamlDoc, E> {
        Ok(YamlDoc::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<YamlDoc, A::Error> {
        let mut doc = YamlDoc::default();
        while let Some(key) = map.next_key::<yaml_serde::Value>()? {
            if key.as_str() == Some("items") {
                doc.had_items = true;
                map.next_value_seed(YamlItemsSeed(&mut *self.0))?;
                continue;
            }
            let value: yaml_serde::Value = map.next_value()?;
            match key.as_str() {
                Some("apiVersion") => doc.api_version = value.as_str().map(str::to_string),
                Some("kind") => doc.kind = value.as_str().map(str::to_string),
                Some(super::KUBE_VERSION_KEY) => doc.kube_version = value.as_str().map(str::to_string),
                _ => {}
            }
            doc.rest.insert(key, value);
        }
        Ok(doc)
    }
}

struct YamlItemsSeed<'a, 's>(&'a mut YamlState<'s>);

impl<'de> DeserializeSeed<'de> for YamlItemsSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for YamlItemsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while let Some(value) = seq.next_element::<yaml_serde::Value>()? {
            let has_kind = value.get("kind").is_some();
            if has_kind || !value.is_mapping() {
                if self.0.store(Some(i), value, None).is_err() {
                    return Err(de::Error::custom(YAML_ABORT));
                }
            } else {
                self.0.pending.push((i, value));
            }
            i += 1;
        }
        Ok(())
    }
}

pub(super) fn load_yaml(text: &str, path: &Path) -> Result<(ClusterObjects, LoadReport), LoadError> {
    // Before the parser, which takes time quadratic in flow nesting before its own limit refuses it.
    super::check_flow_depth(text.as_bytes()).map_err(|e| LoadError::Syntax {
        path: path.to_path_buf(),
        format: Format::Yaml,
        at: Location {
            document: e.document,
            item: None,
            line: Some(e.line),
            column: Some(e.column),
        },
        message: e.to_string(),
    })?;
    let mut objects = ClusterObjects::default();
    let mut report = LoadReport::new(Format::Yaml);
    for (document, de) in yaml_serde::Deserializer::from_str(text).enumerate() {
        report.documents += 1;
        let mut state = YamlState {
            objects: &mut objects,
            report: &mut report,
            failure: None,
            shape: None,
            pending: Vec::new(),
        };
        let result = de.deserialize_any(YamlDocVisitor(&mut state));
        let doc = match result {
            Ok(doc) => doc,
            Err(e) => {
                if let Some(f) = state.failure.take() {
                    return Err(yaml_decode_error(text, path, document, f));
                }
                if let Some((item, message)) = state.shape.take() {
                    return Err(yaml_shape(path, document, item, message));
                }
                let location = e.location();
                let at = Location {
                    document,
                    item: None,
                    line: location.as_ref().map(|l| l.line()),
                    column: location.as_ref().map(|l| l.column()),
                };
                let message = strip_position(&e.to_string());
                return Err(if message.contains("invalid type") {
                    LoadError::Shape {
                        path: path.to_path_buf(),
                        at,
                        message: format!("not a Kubernetes object or List: {message}"),
                    }
                } else {
                    LoadError::Syntax {
                        path: path.to_path_buf(),
                        format: Format::Yaml,
                        at,
                        message,
                    }
                });
            }
        };
        if doc.had_items {
            state.report.record_version(doc.kube_version.as_deref());
            let default = list_element_type(doc.api_version.as_deref(), doc.kind.as_deref());
            for (i, value) in std::mem::take(&mut state.pending) {
                if state.store(Some(i), value, default).is_err() {
                    return Err(yaml_state_error(text, path, document, &mut state));
                }
            }
        } else if !doc.rest.is_empty() {
            let value = yaml_serde::Value::Mapping(doc.rest);
            if state.store(None, value, None).is_err() {
                return Err(yaml_state_error(text, path, document, &mut state));
            }
        }
    }
    report.objects = objects.len();
    Ok((objects, report))
}

fn yaml_shape(path: &Path, document: usize, item: Option<usize>, message: String) -> LoadError {
    LoadError::Shape {
        path: path.to_path_buf(),
        at: Location {
            document,
            item,
            line: None,
            column: None,
        },
        message,
    }
}

fn yaml_state_error(text: &str, path: &Path, document: usize, state: &mut YamlState<'_>) -> LoadError {
    if let Some(f) = state.failure.take() {
        return yaml_decode_error(text, path, document, f);
    }
    let (item, message) = state
        .shape
        .take()
        .unwrap_or((None, "object could not be read".into()));
    yaml_shape(path, document, item, message)
}

/// Builds a decode error, re-reading the failing object straight from the text to learn the line,
/// column and field path (conversion from a value tree knows neither).
fn yaml_decode_error(text: &str, path: &Path, document: usize, f: ItemFailure) -> LoadError {
    let located = yaml_serde::Deserializer::from_str(text)
        .nth(document)
        .and_then(|de| {
            let result = match f.item {
                None => f.kind.check(de),
                Some(index) => de.deserialize_any(LocateItem { index, kind: f.kind }),
            };
            result.err()
        })
        .and_then(|e| {
            let loc = e.location()?;
            Some((loc.line(), loc.column(), strip_position(&e.to_string())))
        });
    let (line, column, message) = match located {
        Some((l, c, m)) => (Some(l), Some(c), m),
        None => (None, None, f.message),
    };
    LoadError::Decode(Box::new(DecodeError {
        path: path.to_path_buf(),
        at: Location {
            document,
            item: f.item,
            line,
            column,
        },
        api_version: f.kind.api_version().to_string(),
        kind: f.kind.kind().to_string(),
        name: f.name,
        message,
    }))
}

/// Walks a List document to `items[index]` and deserializes it as `kind` straight from the parser.
struct LocateItem {
    index: usize,
    kind: ObjectKind,
}

impl<'de> Visitor<'de> for LocateItem {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a List")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<yaml_serde::Value>()? {
            if key.as_str() == Some("items") {
                return map.next_value_seed(LocateInSeq {
                    index: self.index,
                    kind: self.kind,
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

struct LocateInSeq {
    index: usize,
    kind: ObjectKind,
}

impl<'de> DeserializeSeed<'de> for LocateInSeq {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for LocateInSeq {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for _ in 0..self.index {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(KindSeed(self.kind))?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

struct KindSeed(ObjectKind);

impl<'de> DeserializeSeed<'de> for KindSeed {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.0.check(d)
    }
}
