//! The explainer's live snapshot: one kube-runtime watch per row of the object-kind table (every kind
//! the engine reads, not only the webhook's), each object pruned as a listing prunes it before it is
//! stored, and the freshness the answers carry (the highest resourceVersion applied, when the last
//! event arrived, which watches are re-listing or failing).
//!
//! kube-runtime's watcher re-lists on its own when the API server answers 410 Gone (an expired
//! resourceVersion), with backoff; the store swaps in the new list only once it is complete
//! (`InitDone`), so a request during a re-list is answered from the previous state, with its age.
//! Any other failure of a watch that had listed (a broken connection: an API server restart) starts
//! that kind over from a list too ([`watch_kind`]): kube-runtime would re-watch from the last
//! resourceVersion and say nothing when that succeeds, so "watching" could not be told from "still
//! failing" in a quiet cluster; after a list, it can. An API server restart re-initializes its watch
//! cache, so the re-watch would mostly meet 410 and list anyway.
//!
//! Readiness ([`LiveSnapshot::is_ready`]) is that truth: every required kind (nodes, pods) listed
//! and watching now. While one re-lists or fails the component is unready (`/readyz`: the Service
//! stops sending it requests and `--via auto` lists instead), and what it still answers carries the
//! snapshot's age.
//!
//! An optional kind the API server does not serve (404) or this component may not list (403) is
//! probed once at start and left empty with a warning, as a listing does; a required one (nodes,
//! pods) keeps being retried and keeps the component unready.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::ListParams;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use sched_core::ClusterObjects;
use sched_core::features::api_versions::{read_only_where_served, scheduler_reads_at};
use sched_core::snapshot::kube::{is_forbidden_or_missing, server_version, short_reason};
use sched_core::snapshot::{Listing, ObjectKind, Prune};

/// Objects per LIST page of a (re-)list: bounds the transient memory of one decoded page.
pub const LIST_PAGE_SIZE: u32 = 100;

/// Non-terminal pods only, as a listing asks: the scheduler never sees the others.
const NON_TERMINAL_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Pause before a kind whose watch failed is listed again (the list's own failures back off in
/// kube-runtime's watcher).
const RELIST_PAUSE: Duration = Duration::from_millis(500);

/// What one kind's watch is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchState {
    /// Not listed yet (or re-listing after 410 Gone or a broken connection), since the snapshot
    /// stopped following the kind.
    Listing(Instant),
    /// Listed, events applied as they come.
    Watching,
    /// The last attempt failed (it is retried with backoff), since then.
    Failing(Instant, String),
    /// An optional kind not served or not readable: empty, with this warning (none where a listing
    /// says nothing either).
    Skipped(Option<String>),
}

impl WatchState {
    /// Since when the kind has not been followed (None: it is, or it is skipped).
    fn stale_since(&self) -> Option<Instant> {
        match self {
            WatchState::Listing(since) | WatchState::Failing(since, _) => Some(*since),
            WatchState::Watching | WatchState::Skipped(_) => None,
        }
    }
}

/// How current the snapshot is, as answers report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freshness {
    /// The highest resourceVersion of the objects the watches delivered (etcd's revision counter, the
    /// same across kinds): the snapshot has every change up to it.
    pub resource_version: u64,
    /// Time since the last event was applied (None: none yet).
    pub since_last_event: Option<Duration>,
    /// Every required kind has listed and no watch is re-listing or failing.
    pub in_sync: bool,
    /// How long the oldest re-listing or failing watch has been so (zero when in sync): what may be
    /// missing from the snapshot is at most that old.
    pub stale_for: Duration,
    /// Warnings for kinds left empty, and for watches re-listing or failing.
    pub warnings: Vec<String>,
}

/// The freshness records every watch writes into.
#[derive(Debug)]
pub struct Records {
    started: Instant,
    resource_version: AtomicU64,
    /// Milliseconds since `started` of the last event, plus one (0: none yet).
    last_event: AtomicU64,
    /// Each kind's state, and whether it has listed at least once.
    states: Mutex<Vec<(ObjectKind, WatchState, bool)>>,
}

impl Records {
    fn new() -> Self {
        let now = Instant::now();
        Records {
            started: now,
            resource_version: AtomicU64::new(0),
            last_event: AtomicU64::new(0),
            states: Mutex::new(
                ObjectKind::ALL
                    .iter()
                    .map(|&k| (k, WatchState::Listing(now), false))
                    .collect(),
            ),
        }
    }

    fn set(&self, kind: ObjectKind, state: WatchState) {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = states.iter_mut().find(|(k, _, _)| *k == kind) {
            entry.2 |= matches!(state, WatchState::Watching | WatchState::Skipped(_));
            // A failure, then a re-list (or a failure that repeats) keeps the time the kind stopped
            // being followed: what the snapshot may miss is that old.
            entry.1 = match (entry.1.stale_since(), state) {
                (Some(since), WatchState::Listing(_)) => WatchState::Listing(since),
                (Some(since), WatchState::Failing(_, error)) => WatchState::Failing(since, error),
                (_, state) => state,
            };
        }
    }

    /// True when every required kind (nodes, pods) is listed and watching now, and every optional
    /// one has listed once.
    fn synced(&self) -> bool {
        let states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        states.iter().all(|(kind, state, listed_once)| {
            *listed_once && (kind.listing() == Listing::Optional || *state == WatchState::Watching)
        })
    }

    fn applied<K: Resource>(&self, object: &K) {
        let at = self.started.elapsed().as_millis() as u64 + 1;
        self.last_event.store(at, Ordering::Relaxed);
        if let Some(rv) = object
            .meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
        {
            self.resource_version.fetch_max(rv, Ordering::Relaxed);
        }
    }

    /// True once every kind has listed once (skipped kinds count as listed).
    pub fn listed(&self) -> bool {
        let states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        states.iter().all(|(_, _, listed_once)| *listed_once)
    }

    /// The snapshot's freshness now.
    pub fn freshness(&self) -> Freshness {
        let now = Instant::now();
        let states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let mut warnings = Vec::new();
        let mut stale_since: Option<Instant> = None;
        for (kind, state, _) in states.iter() {
            match state {
                WatchState::Watching => {}
                WatchState::Skipped(warning) => warnings.extend(warning.clone()),
                WatchState::Listing(since) => {
                    stale_since = Some(stale_since.map_or(*since, |s| s.min(*since)));
                    warnings.push(format!(
                        "the explainer is (re-)listing {} since {:.0} s ago: its snapshot may miss changes of that time",
                        kind.kind(),
                        now.duration_since(*since).as_secs_f64()
                    ));
                }
                WatchState::Failing(since, error) => {
                    stale_since = Some(stale_since.map_or(*since, |s| s.min(*since)));
                    warnings.push(format!(
                        "the explainer's watch of {} fails since {:.0} s ago ({error}): its snapshot may miss changes of that time",
                        kind.kind(),
                        now.duration_since(*since).as_secs_f64()
                    ));
                }
            }
        }
        let last = self.last_event.load(Ordering::Relaxed);
        Freshness {
            resource_version: self.resource_version.load(Ordering::Relaxed),
            since_last_event: (last > 0)
                .then(|| now.duration_since(self.started + Duration::from_millis(last - 1))),
            in_sync: stale_since.is_none(),
            stale_for: stale_since.map_or(Duration::ZERO, |s| now.duration_since(s)),
            warnings,
        }
    }
}

/// The store's objects in the order a LIST returns them: etcd's key order, `namespace/name` compared
/// as bytes (cluster-scoped kinds: the name). The engine's answer can depend on the order (ties,
/// sampling), so the snapshot must be in the order the CLI's listing sees.
fn in_list_order<K: Resource + Clone>(items: Vec<Arc<K>>) -> Vec<K> {
    let mut keyed: Vec<(String, Arc<K>)> = items
        .into_iter()
        .map(|o| {
            let meta = o.meta();
            let name = meta.name.clone().unwrap_or_default();
            let key = match &meta.namespace {
                Some(ns) => format!("{ns}/{name}"),
                None => name,
            };
            (key, o)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    keyed.into_iter().map(|(_, o)| (*o).clone()).collect()
}

/// What a watched kind is: a k8s-openapi type the engine prunes.
trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Prune + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Prune
        + Send
        + Sync
        + 'static
{
}

/// Runs one kind's watch into its store until the task is aborted.
async fn watch_kind<K: Watched>(
    client: Client,
    mut writer: Writer<K>,
    kind: ObjectKind,
    records: Arc<Records>,
) {
    let api_client = client.clone();
    let api: Api<K> = Api::all(client);
    if kind.listing() == Listing::Optional
        && let Err(e) = api.list_metadata(&ListParams::default().limit(1)).await
        && is_forbidden_or_missing(&e)
    {
        // As a listing: a kind the server does not serve, where its own kube-scheduler does not read
        // it either, is no loss and no warning (`sched_core::snapshot::kube`'s `settle`).
        let missing = matches!(&e, kube::Error::Api(s) if s.code == 404);
        let silent = missing
            && (read_only_where_served(kind.kind())
                || server_version(&api_client)
                    .await
                    .is_some_and(|v| !scheduler_reads_at(v, kind.kind(), kind.api_version())));
        let warning = (!silent).then(|| {
            format!(
                "cannot list {} ({}): {}; continuing without them",
                kind.kind(),
                kind.api_version(),
                short_reason(&e)
            )
        });
        // An empty, complete store: readers see no objects of the kind.
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        records.set(kind, WatchState::Skipped(warning));
        return;
    }
    let mut config = watcher::Config::default()
        .any_semantic()
        .page_size(LIST_PAGE_SIZE);
    if kind == ObjectKind::Pod {
        config = config.fields(NON_TERMINAL_PODS);
    }
    loop {
        let events = watcher(api.clone(), config.clone())
            .default_backoff()
            // Pruned as a listing prunes (the engine's `Prune`), so both hold the same fields.
            .map_ok(|event| event.modify(|o| o.prune()));
        let mut events = std::pin::pin!(events);
        let mut listed = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    writer.apply_watcher_event(&event);
                    match &event {
                        watcher::Event::Init => records.set(kind, WatchState::Listing(Instant::now())),
                        watcher::Event::InitDone => {
                            listed = true;
                            records.set(kind, WatchState::Watching);
                        }
                        watcher::Event::Apply(o)
                        | watcher::Event::Delete(o)
                        | watcher::Event::InitApply(o) => records.applied(o),
                    }
                }
                Err(e) => {
                    tracing::warn!(kind = kind.kind(), error = %e, "explainer watch failed; retrying");
                    records.set(kind, WatchState::Failing(Instant::now(), e.to_string()));
                    // A list that fails is retried by the watcher (with backoff); a watch that
                    // fails after its list starts over from a list (see the module documentation).
                    if listed {
                        break;
                    }
                }
            }
        }
        tokio::time::sleep(RELIST_PAUSE).await;
    }
}

/// Starts one kind's watch on the current runtime.
fn spawn_watch<K: Watched>(
    client: &Client,
    writer: Writer<K>,
    kind: ObjectKind,
    records: &Arc<Records>,
) -> JoinHandle<()> {
    tokio::spawn(watch_kind(client.clone(), writer, kind, records.clone()))
}

macro_rules! live_stores {
    ($( $variant:ident($ty:ty) = $api:literal, $kind:literal => $field:ident,
        shape $shape:ident, prune $prune:ident, list $list:ident,
        webhook [$($stored:ty => $group:ident, slim $slim:ident)?]; )*) => {
        /// One store per row of the object-kind table.
        struct Stores {
            $( $field: Store<$ty>, )*
        }

        /// The stores' writers, handed to the watches.
        struct Writers {
            $( $field: Writer<$ty>, )*
        }

        fn stores() -> (Stores, Writers) {
            $( let $field = reflector::store::<$ty>(); )*
            (
                Stores { $( $field: $field.0.clone(), )* },
                Writers { $( $field: $field.1, )* },
            )
        }

        impl Stores {
            /// Every kind's objects, in list order.
            fn objects(&self) -> ClusterObjects {
                let mut objects = ClusterObjects::default();
                $( objects.$field = in_list_order(self.$field.state()); )*
                objects
            }
        }

        /// Starts one watch per kind.
        fn spawn_all(client: &Client, writers: Writers, records: &Arc<Records>) -> Vec<JoinHandle<()>> {
            vec![$( spawn_watch(client, writers.$field, ObjectKind::$variant, records), )*]
        }
    };
}

sched_core::object_kind_table!(live_stores);

/// The live snapshot: the stores, their watches and their freshness.
pub struct LiveSnapshot {
    stores: Stores,
    records: Arc<Records>,
    watches: Vec<JoinHandle<()>>,
}

impl LiveSnapshot {
    /// Starts watching every kind through `client` (on the current runtime).
    pub fn start(client: &Client) -> Self {
        let (stores, writers) = stores();
        let records = Arc::new(Records::new());
        let watches = spawn_all(client, writers, &records);
        LiveSnapshot {
            stores,
            records,
            watches,
        }
    }

    /// True while the snapshot follows the cluster: every required kind listed and watching now
    /// (`/readyz`).
    pub fn is_ready(&self) -> bool {
        self.records.synced()
    }

    /// True once every kind has listed once: there is a snapshot to answer from, however old.
    pub fn has_listed(&self) -> bool {
        self.records.listed()
    }

    /// How fresh the snapshot is now (cheap: no object is copied).
    pub fn freshness(&self) -> Freshness {
        self.records.freshness()
    }

    /// The objects now, in list order, and how fresh they are.
    pub fn objects(&self) -> (ClusterObjects, Freshness) {
        // Freshness first: the objects are at least as new as what it says.
        let freshness = self.records.freshness();
        (self.stores.objects(), freshness)
    }
}

impl Drop for LiveSnapshot {
    fn drop(&mut self) {
        for watch in &self.watches {
            watch.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(namespace: &str, name: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    /// etcd's key order is `namespace/name` as bytes: `a-b/x` comes before `a/x` ('-' < '/'),
    /// which ordering by namespace, then name, would get wrong.
    #[test]
    fn objects_come_in_list_order() {
        /// (namespace, name) pairs as a store hands them, and the keys in list order.
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            (
                "by name within a namespace",
                &[("a", "y"), ("a", "x")],
                &["a/x", "a/y"],
            ),
            (
                "a namespace that extends another",
                &[("a", "x"), ("a-b", "x")],
                &["a-b/x", "a/x"],
            ),
            (
                "digits before letters",
                &[("n", "p10"), ("n", "p9"), ("n", "pa")],
                &["n/p10", "n/p9", "n/pa"],
            ),
        ];
        for (name, items, want) in cases {
            let got: Vec<String> = in_list_order(items.iter().map(|(ns, n)| pod(ns, n)).collect())
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.metadata.namespace.as_deref().unwrap_or_default(),
                        p.metadata.name.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn freshness_follows_the_watches() {
        let records = Records::new();
        assert!(!records.listed(), "nothing listed yet");
        assert!(!records.freshness().in_sync);
        for &kind in ObjectKind::ALL {
            records.set(kind, WatchState::Watching);
        }
        assert!(records.listed());
        let node = Node {
            metadata: ObjectMeta {
                name: Some("n".into()),
                resource_version: Some("42".into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        records.applied(&node);
        let fresh = records.freshness();
        assert!(fresh.in_sync && fresh.warnings.is_empty() && fresh.resource_version == 42);
        assert!(fresh.since_last_event.is_some());
        // A re-list (410 Gone) makes the snapshot out of sync, with a warning naming the kind; the
        // component stays ready (it has listed once) and answers from the previous state.
        records.set(ObjectKind::Pod, WatchState::Listing(Instant::now()));
        let relisting = records.freshness();
        assert!(records.listed() && !relisting.in_sync);
        assert!(
            relisting.warnings.iter().any(|w| w.contains("Pod")),
            "{:?}",
            relisting.warnings
        );
        records.set(
            ObjectKind::Pod,
            WatchState::Failing(Instant::now(), "connection refused".into()),
        );
        assert!(
            records
                .freshness()
                .warnings
                .iter()
                .any(|w| w.contains("connection refused"))
        );
        records.set(ObjectKind::Pod, WatchState::Watching);
        assert!(records.freshness().in_sync);
    }

    /// Readiness is "following the cluster now": a required kind re-listing or failing makes the
    /// component unready, an optional one does not; the age of what may be missing counts from the
    /// failure, not from the re-list that follows it.
    #[test]
    fn ready_only_while_the_required_kinds_are_watched() {
        let optional = *ObjectKind::ALL
            .iter()
            .find(|k| k.listing() == Listing::Optional)
            .expect("an optional kind");
        let failed_at = Instant::now() - Duration::from_secs(30);
        /// The state set on top of "everything watching", whether ready after it, and the least
        /// staleness the answers report.
        type Case = (&'static str, ObjectKind, Vec<WatchState>, bool, Duration);
        let cases: Vec<Case> = vec![
            ("all watching", ObjectKind::Node, vec![], true, Duration::ZERO),
            (
                "pods re-listing",
                ObjectKind::Pod,
                vec![WatchState::Listing(Instant::now())],
                false,
                Duration::ZERO,
            ),
            (
                "nodes failing, then re-listing: stale since the failure",
                ObjectKind::Node,
                vec![
                    WatchState::Failing(failed_at, "connection refused".into()),
                    WatchState::Listing(Instant::now()),
                ],
                false,
                Duration::from_secs(30),
            ),
            (
                "pods failing, then watching again",
                ObjectKind::Pod,
                vec![
                    WatchState::Failing(failed_at, "connection refused".into()),
                    WatchState::Listing(Instant::now()),
                    WatchState::Watching,
                ],
                true,
                Duration::ZERO,
            ),
            (
                "an optional kind failing",
                optional,
                vec![WatchState::Failing(failed_at, "forbidden".into())],
                true,
                Duration::from_secs(30),
            ),
        ];
        for (name, kind, states, ready, stale_at_least) in cases {
            let records = Records::new();
            for &k in ObjectKind::ALL {
                records.set(k, WatchState::Watching);
            }
            for state in states {
                records.set(kind, state);
            }
            assert_eq!(records.synced(), ready, "{name}");
            let fresh = records.freshness();
            assert!(fresh.stale_for >= stale_at_least, "{name}: {:?}", fresh.stale_for);
            assert_eq!(fresh.in_sync, fresh.stale_for.is_zero(), "{name}");
        }
        // Before the first list nothing is ready.
        assert!(!Records::new().synced());
    }
}
