//! Loading [`ClusterObjects`] from the API server (feature `kube`): every kind is listed concurrently,
//! in one request whose body is cut into batches of whole items as it streams in
//! ([`ApiLoadOptions::page_size`] 0), or page by page as raw JSON; each batch or page is decoded on
//! the blocking pool while the rest arrives, by the file loader's decoder: only the fields scheduling
//! reads, in parallel, pods on nodes reduced to their scheduling facts as they are decoded when
//! [`ApiLoadOptions::detail`] asks for it. Peak memory stays near the pruned size.
//!
//! Which kinds are listed, and which of them are required, is the object-kind table's
//! ([`super::kinds`]). Nodes and pods are required. Every other kind only refines decisions (volume binding and limits, PDBs, spread
//! defaults, namespace selectors), so a kind the user may not list (403) or the server does not serve
//! (404) becomes a warning and an empty list instead of a failure; no warning when the server's own
//! kube-scheduler does not read the kind at that version either (resource.k8s.io/v1 on v1.33,
//! `features::api_versions`).
//!
//! To save what was loaded, use [`write_list_yaml`] (what `kubectl sched snapshot` writes) or
//! [`write_list_json`] (faster to load back for large clusters).

use ::kube::Client;
use ::kube::api::ListParams;

use super::load::{ApiListMeta, ListPageMeta, ListSplitter, ObjectKind, PageError, decode_list_page};
pub use super::load::{write_list_json, write_list_yaml};
use super::{ClusterObjects, Listing, PodDetail};
use crate::features::KubeVersion;
use crate::features::api_versions::{read_only_where_served, scheduler_reads_at};

/// How to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiLoadOptions {
    /// Items per page (`limit`); the server hands a continue token for the rest. 0: no limit, each
    /// kind in one response.
    pub page_size: u32,
    /// Restricts namespaced kinds to one namespace. The result is then partial: pods of other
    /// namespaces still use node resources and may match affinity terms, so only use this for dumps.
    pub namespace: Option<String>,
    /// Asks the server to leave out Succeeded/Failed pods, which the scheduler ignores anyway.
    pub skip_terminal_pods: bool,
    /// How much of the pods on nodes to keep (see [`PodDetail`]); decided per pod as each page is
    /// decoded, so a compact load never holds every pod's containers at once.
    pub detail: PodDetail,
}

impl Default for ApiLoadOptions {
    fn default() -> Self {
        ApiLoadOptions {
            page_size: 500,
            namespace: None,
            skip_terminal_pods: true,
            detail: PodDetail::Full,
        }
    }
}

/// A required kind could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum ApiLoadError {
    /// Listing failed (connection, authorization on a required kind, server error).
    #[error("cannot list {kind} ({api_version}): {}", crate::api_error::describe(.source))]
    List {
        /// The kind.
        kind: &'static str,
        /// Its apiVersion.
        api_version: &'static str,
        /// The client error.
        #[source]
        source: ::kube::Error,
    },
    /// The API server's answer did not decode as the kind's list.
    #[error(transparent)]
    Decode(#[from] PageError),
}

/// The server's field selector that drops terminal pods.
const NON_TERMINAL_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// True for errors that mean "you may not, or the server has no such kind": 403 and 404.
pub fn is_forbidden_or_missing(err: &::kube::Error) -> bool {
    matches!(err, ::kube::Error::Api(status) if status.code == 403 || status.code == 404)
}

fn is_expired(err: &::kube::Error) -> bool {
    matches!(err, ::kube::Error::Api(status) if status.code == 410)
}

/// Why listing one kind stopped.
#[derive(Debug)]
enum ListFailure {
    /// The request failed.
    Api(::kube::Error),
    /// A page did not decode.
    Decode(PageError),
}

/// Lists every object of one kind as raw JSON pages, following continue tokens, and decodes each page
/// on the blocking pool (in parallel, into the compact forms the file loader uses) while the next one
/// is fetched. Restarts once from the beginning if the server expired the token (410 Gone) in the
/// middle. Returns the objects (in list order) and the resourceVersion the list was served at.
async fn list_kind(
    client: &Client,
    kind: ObjectKind,
    namespace: Option<&str>,
    options: &ApiLoadOptions,
    field_selector: Option<&str>,
) -> Result<(ClusterObjects, Option<String>), ListFailure> {
    let path = kind.url_path(namespace);
    if options.page_size == 0 {
        return list_kind_streamed(client, kind, &path, options, field_selector).await;
    }
    let mut restarted = false;
    'attempt: loop {
        // No resourceVersion: the latest state, which the API server (1.34+) serves from its watch
        // cache once the cache has caught up with etcd.
        let mut params = ListParams::default().limit(options.page_size);
        if let Some(fs) = field_selector {
            params = params.fields(fs);
        }
        let mut pages = DecodePipeline::new(kind);
        let mut resource_version = None;
        loop {
            let text = match request_page(client, &path, &params).await {
                Ok(text) => text,
                Err(e) if is_expired(&e) && !restarted && params.continue_token.is_some() => {
                    restarted = true;
                    continue 'attempt;
                }
                Err(e) => return Err(ListFailure::Api(e)),
            };
            let meta = list_metadata(&text);
            pages.push(decode_on_blocking_pool(kind, text, options)).await?;
            resource_version = resource_version.or(meta.resource_version);
            match meta.continue_token {
                // A paged read continues from the version of its first page.
                Some(token) => {
                    params = ListParams {
                        resource_version: None,
                        version_match: None,
                        ..params
                    }
                    .continue_token(&token)
                }
                None => break,
            }
        }
        return Ok((pages.finish().await?, resource_version));
    }
}

/// A page (or batch) being decoded on the blocking pool.
type PageTask = tokio::task::JoinHandle<Result<ClusterObjects, PageError>>;

fn decode_on_blocking_pool(kind: ObjectKind, text: String, options: &ApiLoadOptions) -> PageTask {
    let detail = options.detail.clone();
    tokio::task::spawn_blocking(move || {
        let mut objects = ClusterObjects::default();
        decode_list_page(kind, &text, &detail, &mut objects).map(|_| objects)
    })
}

/// Pages (or batches) decoding on the blocking pool, collected in list order; at most
/// [`DECODES_IN_FLIGHT`] at once, so a list that arrives faster than it decodes waits for the decoder
/// instead of piling up its text in memory.
struct DecodePipeline {
    kind: ObjectKind,
    in_flight: std::collections::VecDeque<PageTask>,
    objects: ClusterObjects,
}

/// Pages or batches decoding at once (a batch is up to [`STREAM_BATCH_BYTES`] of text).
const DECODES_IN_FLIGHT: usize = 8;

impl DecodePipeline {
    fn new(kind: ObjectKind) -> Self {
        DecodePipeline {
            kind,
            in_flight: std::collections::VecDeque::new(),
            objects: ClusterObjects::default(),
        }
    }

    /// Adds a decode; waits for the oldest first when [`DECODES_IN_FLIGHT`] are running.
    async fn push(&mut self, task: PageTask) -> Result<(), ListFailure> {
        if self.in_flight.len() >= DECODES_IN_FLIGHT {
            self.collect_oldest().await?;
        }
        self.in_flight.push_back(task);
        Ok(())
    }

    async fn collect_oldest(&mut self) -> Result<(), ListFailure> {
        let Some(task) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let decoded = task.await.map_err(|e| {
            ListFailure::Decode(PageError {
                kind: self.kind.kind(),
                name: None,
                message: format!("decoding stopped: {e}"),
            })
        })?;
        self.objects.append(decoded.map_err(ListFailure::Decode)?);
        Ok(())
    }

    /// Every object decoded, in list order.
    async fn finish(mut self) -> Result<ClusterObjects, ListFailure> {
        while !self.in_flight.is_empty() {
            self.collect_oldest().await?;
        }
        Ok(self.objects)
    }
}

/// Bytes of items per batch when a list arrives in one response: large enough that a batch spreads
/// over the decoder's threads, small enough that few are held at once.
const STREAM_BATCH_BYTES: usize = 4 << 20;

/// Lists one kind in a single request (no `limit`: the API server serves it from its watch cache in
/// one pass, about half the work of the same list in pages) and decodes it as it streams in: the body
/// is cut into batches of whole items ([`ListSplitter`]), each decoded on the blocking pool while the
/// rest arrives, so the whole response is never held.
async fn list_kind_streamed(
    client: &Client,
    kind: ObjectKind,
    path: &str,
    options: &ApiLoadOptions,
    field_selector: Option<&str>,
) -> Result<(ClusterObjects, Option<String>), ListFailure> {
    use futures::AsyncBufReadExt;

    let mut params = ListParams::default();
    if let Some(fs) = field_selector {
        params = params.fields(fs);
    }
    let split_error = |e: super::load::SplitError| {
        ListFailure::Decode(PageError {
            kind: kind.kind(),
            name: None,
            message: e.to_string(),
        })
    };
    let mut body = Box::pin(
        request_stream(client, path, &params)
            .await
            .map_err(ListFailure::Api)?,
    );
    let mut splitter = ListSplitter::new(STREAM_BATCH_BYTES);
    let mut pages = DecodePipeline::new(kind);
    loop {
        let chunk = body.fill_buf().await.map_err(|e| {
            // The server answered and the body broke off (a reset, a read timeout).
            ListFailure::Decode(PageError {
                kind: kind.kind(),
                name: None,
                message: format!("reading the response: {}", crate::api_error::with_causes(&e)),
            })
        })?;
        if chunk.is_empty() {
            break;
        }
        let read = chunk.len();
        splitter.push(chunk).map_err(split_error)?;
        body.as_mut().consume_unpin(read);
        for batch in splitter.take_batches().map_err(split_error)? {
            pages.push(decode_on_blocking_pool(kind, batch, options)).await?;
        }
    }
    let (batches, envelope) = splitter.finish().map_err(split_error)?;
    for batch in batches {
        pages.push(decode_on_blocking_pool(kind, batch, options)).await?;
    }
    // The envelope is decoded as a page too: it holds `"items":[]`, unless the body was a list the
    // splitter could not cut (then its items are decoded from here, errors named as for a page).
    let meta = list_metadata(&envelope);
    pages
        .push(decode_on_blocking_pool(kind, envelope, options))
        .await?;
    Ok((pages.finish().await?, meta.resource_version))
}

/// Attempts at one page while the API server answers 429 (too many requests: its priority and
/// fairness queues are full), a second apart. Nothing else is retried: a client that retries 503 and
/// 504 (etcd unavailable, the server's own 60 s timeout) would wait for minutes before failing.
const TOO_MANY_REQUESTS_ATTEMPTS: usize = 4;

/// Sends the list request `send` makes, again while the answer is a 429 ([`TOO_MANY_REQUESTS_ATTEMPTS`]).
async fn retrying_too_many_requests<T, F, Fut>(mut send: F) -> Result<T, ::kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ::kube::Error>>,
{
    let mut attempt = 1;
    loop {
        match send().await {
            Err(::kube::Error::Api(status)) if status.code == 429 && attempt < TOO_MANY_REQUESTS_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            other => return other,
        }
    }
}

/// One page of a list, whole.
async fn request_page(client: &Client, path: &str, params: &ListParams) -> Result<String, ::kube::Error> {
    let request = ::kube::core::Request::new(path);
    retrying_too_many_requests(|| async {
        let list = request.list(params).map_err(::kube::Error::BuildRequest)?;
        client.request_text(list).await
    })
    .await
}

/// A list request whose body is returned as it arrives.
async fn request_stream(
    client: &Client,
    path: &str,
    params: &ListParams,
) -> Result<impl futures::AsyncBufRead + use<>, ::kube::Error> {
    let request = ::kube::core::Request::new(path);
    retrying_too_many_requests(|| async {
        let list = request.list(params).map_err(::kube::Error::BuildRequest)?;
        client.request_stream(list).await
    })
    .await
}

/// The list's `metadata` (continue token, resourceVersion), read without decoding its items: the API
/// server writes `metadata` before `items`, so this stops after a few bytes.
fn list_metadata(text: &str) -> ListPageMeta {
    struct MetadataOnly(Option<ApiListMeta>);
    impl<'de> serde::de::Visitor<'de> for &mut MetadataOnly {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "metadata" {
                    self.0 = Some(map.next_value()?);
                    // Stop here: the items are decoded elsewhere.
                    return Err(serde::de::Error::custom("metadata read"));
                }
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut found = MetadataOnly(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let _ = serde::Deserializer::deserialize_map(&mut de, &mut found);
    found
        .0
        .map(|m| ListPageMeta {
            continue_token: m.continue_token.filter(|t| !t.is_empty()),
            resource_version: m.resource_version,
        })
        .unwrap_or_default()
}

/// Turns one kind's list into objects, a warning and an empty list (an optional kind the user may
/// not list or the server does not serve), or the load's error. A kind the server does not serve
/// (404) at the version the engine reads, and that `server`'s own kube-scheduler does not read at
/// that version either, is an empty list without a warning: nothing the cluster's scheduler sees is
/// missing (a v1.33 server and resource.k8s.io/v1, see `features::api_versions`).
fn settle(
    kind: ObjectKind,
    required: bool,
    result: Result<(ClusterObjects, Option<String>), ListFailure>,
    server: Option<KubeVersion>,
    warnings: &mut Vec<String>,
) -> Result<ClusterObjects, ApiLoadError> {
    match result {
        Ok((items, _)) => Ok(items),
        Err(ListFailure::Api(e))
            if !required
                && is_missing(&e)
                && (read_only_where_served(kind.kind())
                    || server.is_some_and(|v| !scheduler_reads_at(v, kind.kind(), kind.api_version()))) =>
        {
            Ok(ClusterObjects::default())
        }
        Err(ListFailure::Api(e)) if !required && is_forbidden_or_missing(&e) => {
            warnings.push(format!(
                "cannot list {} ({}): {}; continuing without them",
                kind.kind(),
                kind.api_version(),
                short_reason(&e)
            ));
            Ok(ClusterObjects::default())
        }
        Err(ListFailure::Api(source)) => Err(ApiLoadError::List {
            kind: kind.kind(),
            api_version: kind.api_version(),
            source,
        }),
        Err(ListFailure::Decode(e)) => Err(ApiLoadError::Decode(e)),
    }
}

/// The API server's own words for a refusal (its Status message), as a listing's warnings quote it.
pub fn short_reason(e: &::kube::Error) -> String {
    match e {
        ::kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        ::kube::Error::Api(status) => format!("HTTP {}", status.code),
        other => other.to_string(),
    }
}

/// Lists everything the engine needs, every kind of the object-kind table at once, each page decoded
/// while the next is fetched. Returns the (pruned) objects, in the table's order, and warnings for
/// optional kinds that could not be listed.
pub async fn load_from_api(
    client: &Client,
    options: &ApiLoadOptions,
) -> Result<(ClusterObjects, Vec<String>), ApiLoadError> {
    let scoped = options.namespace.as_deref();
    let listed = futures::future::join_all(ObjectKind::ALL.iter().map(|&kind| {
        let fields = (kind == ObjectKind::Pod && options.skip_terminal_pods).then_some(NON_TERMINAL_PODS);
        list_kind(client, kind, scoped, options, fields)
    }))
    .await;
    // The server's release decides whether an unserved kind is a loss (see `settle`); asked only
    // when a kind is missing, so a server that serves everything costs no extra request.
    let any_missing = listed
        .iter()
        .any(|r| matches!(r, Err(ListFailure::Api(e)) if is_missing(e)));
    let server = if any_missing {
        server_version(client).await
    } else {
        None
    };
    let mut warnings = Vec::new();
    let mut objects = ClusterObjects::default();
    for (&kind, result) in ObjectKind::ALL.iter().zip(listed) {
        objects.append(settle(
            kind,
            kind.listing() == Listing::Required,
            result,
            server,
            &mut warnings,
        )?);
    }
    Ok((objects, warnings))
}

/// The API server's release (`GET /version`), or `None` when it cannot be read (then every
/// unserved optional kind is a warning, as when the release is unknown).
pub async fn server_version(client: &Client) -> Option<KubeVersion> {
    let info = client.apiserver_version().await.ok()?;
    KubeVersion::parse(&info.git_version).ok()
}

/// 404: the server does not serve the kind (its group/version is not enabled).
fn is_missing(err: &::kube::Error) -> bool {
    matches!(err, ::kube::Error::Api(status) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> ::kube::Error {
        let status: ::kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "code": code,
            "message": message,
            "reason": "Forbidden",
        }))
        .unwrap();
        ::kube::Error::Api(Box::new(status))
    }

    #[test]
    fn optional_kinds_forbidden_or_missing_become_warnings() {
        for code in [403, 404] {
            let mut warnings = Vec::new();
            let got = settle(
                ObjectKind::CSIStorageCapacity,
                false,
                Err(ListFailure::Api(api_error(
                    code,
                    "csistoragecapacities is forbidden",
                ))),
                None,
                &mut warnings,
            )
            .unwrap();
            assert!(got.is_empty());
            assert_eq!(
                warnings,
                vec![
                    "cannot list CSIStorageCapacity (storage.k8s.io/v1): csistoragecapacities is forbidden; \
                     continuing without them"
                        .to_string()
                ]
            );
        }
    }

    /// A kind the server does not serve is silent when the server's own scheduler does not read
    /// it there either (DRA on v1.33, DeviceTaintRule before v1.37, the workload API anywhere), a
    /// warning when it does, and a 403 is always a warning.
    #[test]
    fn unserved_kinds_are_silent_where_the_servers_scheduler_does_not_read_them() {
        let cases = [
            (ObjectKind::ResourceClaim, 404, Some((33, 13)), false),
            (ObjectKind::DeviceClass, 404, Some((33, 13)), false),
            (ObjectKind::ResourceClaimTemplate, 404, Some((33, 13)), false),
            (ObjectKind::DeviceTaintRule, 404, Some((34, 4)), false),
            (ObjectKind::DeviceTaintRule, 404, Some((36, 3)), false),
            (ObjectKind::DeviceTaintRule, 404, Some((37, 1)), true),
            (ObjectKind::ResourceSlice, 404, Some((34, 4)), true),
            (ObjectKind::ResourceClaim, 403, Some((33, 13)), true),
            (ObjectKind::CSIStorageCapacity, 404, Some((33, 13)), true),
            // The release unknown (GET /version failed): warned.
            (ObjectKind::DeviceTaintRule, 404, None, true),
            // The workload API is served only where GenericWorkload's version is enabled: a
            // 404 is silent on every release, known or not; a 403 is still a warning.
            (ObjectKind::PodGroup, 404, Some((37, 1)), false),
            (ObjectKind::Workload, 404, Some((37, 1)), false),
            (ObjectKind::PodGroup, 404, None, false),
            (ObjectKind::PodGroup, 403, Some((37, 1)), true),
        ];
        for (kind, code, server, warned) in cases {
            let mut warnings = Vec::new();
            let server = server.map(|(minor, patch)| KubeVersion::new(minor, patch));
            let got = settle(
                kind,
                false,
                Err(ListFailure::Api(api_error(
                    code,
                    "the server could not find the requested resource",
                ))),
                server,
                &mut warnings,
            )
            .unwrap();
            assert!(got.is_empty());
            assert_eq!(
                warnings.len(),
                usize::from(warned),
                "{kind:?} {code} on {server:?}: {warnings:?}"
            );
        }
    }

    /// Every resource.k8s.io kind the engine lists has its row in the table of read versions, and
    /// the pinned release reads it where the engine lists it.
    #[test]
    fn every_resource_kind_has_its_read_versions() {
        use crate::features::api_versions::scheduler_read_version;
        for &kind in ObjectKind::ALL {
            if kind.api_version().starts_with("resource.k8s.io/") {
                assert_eq!(
                    scheduler_read_version(KubeVersion::PINNED, kind.kind()),
                    Some(kind.api_version()),
                    "{kind:?}"
                );
            }
        }
    }

    #[test]
    fn required_kinds_and_other_errors_fail() {
        let mut warnings = Vec::new();
        let err = settle(
            ObjectKind::Pod,
            true,
            Err(ListFailure::Api(api_error(403, "pods is forbidden"))),
            None,
            &mut warnings,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot list Pod (v1): Error from server (Forbidden): pods is forbidden"
        );
        let err = settle(
            ObjectKind::PodDisruptionBudget,
            false,
            Err(ListFailure::Api(api_error(500, "etcd unavailable"))),
            None,
            &mut warnings,
        )
        .unwrap_err();
        assert!(matches!(
            err,
            ApiLoadError::List {
                kind: "PodDisruptionBudget",
                ..
            }
        ));
        assert!(warnings.is_empty());
    }

    /// A page as the API server writes it: `metadata` first, items without apiVersion/kind, and every
    /// pod with the priority admission gave it.
    const POD_PAGE: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"4711","continue":"tok-2","remainingItemCount":1},"items":[
        {"metadata":{"name":"web-0","namespace":"team","uid":"u0"},"spec":{"nodeName":"n1","priority":0,"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"250m"}},"env":[{"name":"A","value":"b"}]}]},"status":{"phase":"Running"}},
        {"metadata":{"name":"web-1","namespace":"team","uid":"u1"},"spec":{"priority":0,"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Pending"}},
        {"metadata":{"name":"done","namespace":"team","uid":"u2"},"spec":{"nodeName":"n1","priority":0,"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Succeeded"}}
    ]}"#;

    #[test]
    fn list_metadata_is_read_without_the_items() {
        let meta = list_metadata(POD_PAGE);
        assert_eq!(meta.continue_token.as_deref(), Some("tok-2"));
        assert_eq!(meta.resource_version.as_deref(), Some("4711"));
        let last = list_metadata(
            r#"{"kind":"NodeList","metadata":{"resourceVersion":"9","continue":""},"items":[]}"#,
        );
        assert_eq!(
            (last.continue_token, last.resource_version.as_deref()),
            (None, Some("9"))
        );
        assert_eq!(list_metadata("not json"), ListPageMeta::default());
    }

    #[test]
    fn pages_decode_like_files_with_pods_placed_as_asked() {
        let mut full = ClusterObjects::default();
        let meta = decode_list_page(ObjectKind::Pod, POD_PAGE, &PodDetail::Full, &mut full).unwrap();
        assert_eq!(meta.continue_token.as_deref(), Some("tok-2"));
        assert_eq!((full.pods.len(), full.placed_pods.len()), (3, 0));
        // Pruned as a file's pods are: environment variables are not scheduling facts.
        assert!(full.pods[0].spec.as_ref().unwrap().containers[0].env.is_none());

        let mut compact = ClusterObjects::default();
        let detail = PodDetail::CompactPlaced {
            keep: Default::default(),
        };
        decode_list_page(ObjectKind::Pod, POD_PAGE, &detail, &mut compact).unwrap();
        // The pending pod stays whole, the running one is reduced, the terminal one is dropped.
        let whole: Vec<_> = compact
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(whole, ["web-1"]);
        assert_eq!(compact.placed_pods.len(), 1);
        assert_eq!(compact.placed_pods[0].name(), "web-0");
    }

    #[test]
    fn a_page_that_does_not_decode_names_the_item_and_field() {
        let page = r#"{"metadata":{},"items":[{"metadata":{"name":"n1"},"spec":{"taints":"oops"}}]}"#;
        let err = decode_list_page(
            ObjectKind::Node,
            page,
            &PodDetail::Full,
            &mut ClusterObjects::default(),
        )
        .unwrap_err();
        assert_eq!(err.kind, "Node");
        assert_eq!(err.name.as_deref(), Some("n1"));
        assert!(
            err.message.starts_with("spec.taints: invalid type"),
            "{}",
            err.message
        );
        let err = decode_list_page(
            ObjectKind::Pod,
            "42",
            &PodDetail::Full,
            &mut ClusterObjects::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Pod list from the API server: not a list"),
            "{err}"
        );
    }

    #[test]
    fn expired_tokens_are_recognized() {
        assert!(is_expired(&api_error(410, "too old resource version")));
        assert!(!is_forbidden_or_missing(&api_error(410, "gone")));
        assert!(is_forbidden_or_missing(&api_error(404, "not found")));
    }
}
