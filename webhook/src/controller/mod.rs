//! The controller: the webhook's cluster writes, made for pods the API server has stored.
//!
//! Admission cannot know whether the object it admits will be stored: a later webhook can reject it,
//! validation can (422), the create can fail (AlreadyExists), and anyone who reaches the webhook's port
//! can send a review for a pod that never existed. The Kubernetes documentation therefore asks webhooks
//! with side effects for a reconciler. sched-webhook goes one step further: admission writes nothing
//! (it denies with the scheduler's reason and patches the pod), and this controller does the volume
//! work once the pod is stored — PreBind for pods bound to a node (created with `spec.nodeName`, or
//! bound through pods/binding) and pre-binding for opted-in pods — and clears stale nominations once a
//! binding is stored.
//!
//! It is a kube-runtime [`Controller`] over the cache's pod store (no second watch, no second copy of
//! the pods), fed from the cache's [`crate::cache::PodTriggers`] queue: the pod reflector queues each
//! pod it applies, without ever waiting for the controller, and the controller takes nothing before
//! the whole cache (claims, PVs, classes, namespaces, not only pods) has synced. Every replica runs
//! it; only the holder of a coordination.k8s.io Lease writes (kube-lease-manager), so two replicas
//! never race for one PV, and a replica that gains the Lease queues every pod again.

pub mod execute;
pub mod stored_pod;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::runtime::controller::{Action as Requeue, Config as ControllerRuntimeConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube_lease_manager::LeaseManagerBuilder;

use sched_core::apply::ApplyOptions;

use crate::admission::Decision;
use crate::cache::Cache;
use crate::metrics::Metrics;

use execute::{PlanEnd, WriteFor, clear_nominations, run_plan};
use stored_pod::{Scope, VolumeWork, nomination_work, volume_work};

/// Why the controller cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The Lease could not be set up.
    #[error("leader election on Lease {namespace}/{name} failed: {message}")]
    Lease {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// A decision task panicked (a bug): the pod is looked at again later.
    #[error("deciding for pod {0} failed")]
    Decide(String),
}

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// The Lease that elects the writing replica.
    pub lease_name: String,
    /// Its namespace.
    pub lease_namespace: String,
    /// This replica's identity in the Lease (the pod name in a Deployment).
    pub identity: String,
    /// Lease duration in seconds (a dead leader's writes resume elsewhere after about this long).
    pub lease_seconds: u64,
    /// Which pods are served.
    pub scope: Scope,
    /// Time allowed to one pod's plan before the rest waits for the next reconcile.
    pub plan_budget: Duration,
    /// Pods reconciled at once.
    pub concurrency: u16,
}

/// What reconciles share.
pub struct Context {
    /// The reflector caches.
    pub cache: Arc<Cache>,
    /// The client writes go through.
    pub client: Client,
    /// Counters (shared with the HTTP side).
    pub metrics: Arc<Metrics>,
    /// Field manager and retries of the writes.
    pub apply_options: ApplyOptions,
    /// The configuration.
    pub config: ControllerConfig,
    /// Bound pods whose nominations were settled, by UID, with when (pruned after the binding window).
    settled_bindings: Mutex<SettledBindings>,
}

/// Bound pods whose nominations were settled, by UID, with when; pruned at most every few seconds
/// (a reconcile of every pod at once must not sweep the whole map each time).
#[derive(Debug)]
struct SettledBindings {
    at: HashMap<String, Instant>,
    pruned: Instant,
}

/// How often the settled bindings are pruned.
const SETTLED_PRUNE_INTERVAL: Duration = Duration::from_secs(10);

impl Context {
    /// A context for these parts.
    pub fn new(cache: Arc<Cache>, client: Client, metrics: Arc<Metrics>, config: ControllerConfig) -> Self {
        Context {
            cache,
            client,
            metrics,
            apply_options: ApplyOptions::new("sched-webhook"),
            config,
            settled_bindings: Mutex::new(SettledBindings {
                at: HashMap::new(),
                pruned: Instant::now(),
            }),
        }
    }

    fn is_leader(&self) -> bool {
        self.metrics.is_leader()
    }

    fn binding_settled(&self, uid: &str) -> bool {
        let mut settled = self
            .settled_bindings
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let window = self.config.scope.binding_window;
        if settled.pruned.elapsed() >= SETTLED_PRUNE_INTERVAL {
            settled.at.retain(|_, at| at.elapsed() <= window);
            settled.pruned = Instant::now();
        }
        settled.at.get(uid).is_some_and(|at| at.elapsed() <= window)
    }

    fn settle_binding(&self, uid: &str) {
        self.settled_bindings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .at
            .insert(uid.to_string(), Instant::now());
    }
}

/// When a pod whose work could not be finished is looked at again.
const RETRY_SOON: Duration = Duration::from_secs(1);
/// When a pod that waits for something outside the controller (a claim, a node, the PV controller)
/// is looked at again.
const RETRY_LATER: Duration = Duration::from_secs(10);

/// Default [`Scope::binding_window`].
pub const DEFAULT_BINDING_WINDOW: Duration = Duration::from_secs(120);
/// Default [`ControllerConfig::plan_budget`].
pub const DEFAULT_PLAN_BUDGET: Duration = Duration::from_secs(30);
/// Default [`ControllerConfig::concurrency`].
pub const DEFAULT_CONCURRENCY: u16 = 4;

/// How long shutdown waits for the Lease to be released.
const LEASE_RELEASE_WAIT: Duration = Duration::from_secs(2);

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

async fn decide_blocking<T: Send + 'static>(
    pod: &Pod,
    decide: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ControllerError> {
    tokio::task::spawn_blocking(decide)
        .await
        .map_err(|_| ControllerError::Decide(pod_key(pod)))
}

/// One pod: its volume work, then its nominations.
pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Requeue, ControllerError> {
    if !ctx.is_leader() {
        // Looked at again later: a replica that loses the Lease for a moment (a slow renewal) and
        // gets it back must not forget the pods it saw meanwhile, which may never change again.
        return Ok(Requeue::requeue(RETRY_LATER));
    }
    let node = node_of(&pod);
    let target = WriteFor {
        pod: &pod,
        node: &node,
    };
    // The soonest of the reasons to look again wins: a plan cut short must not wait behind a
    // claim that waits for the PV controller.
    let mut look_again: Option<Duration> = None;
    let mut sooner = |after: Duration| look_again = Some(look_again.map_or(after, |d| d.min(after)));

    let work = {
        let (pod, ctx) = (pod.clone(), ctx.clone());
        decide_blocking(&pod.clone(), move || {
            volume_work(&pod, ctx.cache.as_ref(), &ctx.config.scope)
        })
        .await?
    };
    match work {
        VolumeWork::Nothing => {}
        VolumeWork::Skipped(reason) => {
            ctx.metrics.pod_skipped();
            tracing::info!(pod = %pod_key(&pod), reason, "volumes not pre-bound");
        }
        VolumeWork::Decide(Decision {
            denial: Some(reason), ..
        }) => {
            tracing::warn!(pod = %pod_key(&pod), node, reason, "volumes cannot be pre-bound");
            sooner(RETRY_LATER);
        }
        VolumeWork::Decide(decision) => {
            for warning in &decision.warnings {
                tracing::info!(pod = %pod_key(&pod), node, warning, "volumes not pre-bound");
            }
            if !decision.plan.is_empty() {
                match run_plan(&ctx, &decision.plan, &target, ctx.config.plan_budget).await {
                    PlanEnd::Done => {}
                    PlanEnd::Conflict(_) | PlanEnd::OutOfTime { .. } => sooner(RETRY_SOON),
                    PlanEnd::Failed(_) => sooner(RETRY_LATER),
                }
            }
            // A bound pod whose claims wait for something (a claim not created yet, the PV controller):
            // look again. An unbound opted-in pod is looked at again when it changes (kube-scheduler
            // binds it), not on a timer: each look schedules it over the whole cluster.
            if !decision.warnings.is_empty() && !node.is_empty() {
                sooner(RETRY_LATER);
            }
        }
    }

    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if !node.is_empty() && !ctx.binding_settled(&uid) {
        let clear = {
            let (pod, ctx) = (pod.clone(), ctx.clone());
            decide_blocking(&pod.clone(), move || {
                nomination_work(&pod, ctx.cache.as_ref(), &ctx.config.scope, Timestamp::now())
            })
            .await?
        };
        if clear_nominations(&ctx, &clear, &target).await {
            ctx.settle_binding(&uid);
        } else {
            sooner(RETRY_SOON);
        }
    }
    Ok(look_again.map_or_else(Requeue::await_change, Requeue::requeue))
}

fn error_policy(pod: Arc<Pod>, error: &ControllerError, _ctx: Arc<Context>) -> Requeue {
    tracing::warn!(pod = %pod_key(&pod), error = %error, "reconcile failed");
    Requeue::requeue(RETRY_LATER)
}

/// Runs the controller until `shutdown` resolves: the leader election (over `lease_client`), and the
/// reconciles of the pods the cache's pod reflector queues ([`crate::cache::PodTriggers`]), from the
/// moment the whole cache has synced.
///
/// The Lease has its own client, as kube-scheduler's leader election has: renewals then never queue
/// behind a burst of PV writes on the write client's connections, where a few timeouts in a row
/// would back the lease manager off for up to 30 s and hand the pods to nobody meanwhile.
pub async fn run(
    ctx: Arc<Context>,
    lease_client: Client,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), ControllerError> {
    let config = &ctx.config;
    let lease_error = |message: String| ControllerError::Lease {
        namespace: config.lease_namespace.clone(),
        name: config.lease_name.clone(),
        message,
    };
    let manager = LeaseManagerBuilder::new(lease_client, &config.lease_name)
        .with_namespace(&config.lease_namespace)
        .with_identity(&config.identity)
        .with_duration(config.lease_seconds)
        .with_grace(config.lease_seconds.div_ceil(3).max(1))
        .with_field_manager("sched-webhook")
        .build()
        .await
        .map_err(|e| lease_error(e.to_string()))?;
    let (mut leadership, lease_task) = manager.watch().await;
    let store = ctx.cache.pod_store();
    let triggers = ctx.cache.pod_triggers();
    let metrics = ctx.metrics.clone();
    let identity = config.identity.clone();
    let follower = tokio::spawn(async move {
        while leadership.changed().await.is_ok() {
            let leader = *leadership.borrow_and_update();
            if leader != metrics.is_leader() {
                metrics.set_leader(leader);
                tracing::info!(identity = %identity, leader, "controller leadership changed");
                if leader {
                    // Every pod again: a pod the previous leader left half done may never change.
                    triggers.push_all(store.state().iter().map(|pod| ObjectRef::from_obj(&**pod)));
                }
            }
        }
        metrics.set_leader(false);
    });
    let queued = ctx.cache.pod_triggers().stream(ctx.cache.synced());
    // No trigger stream of objects: every request comes from the queue (`reconcile_on`).
    let objects = futures::stream::empty::<Result<Pod, watcher::Error>>();
    Controller::for_stream(objects, ctx.cache.pod_store())
        .with_config(ControllerRuntimeConfig::default().concurrency(config.concurrency))
        .reconcile_on(queued)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| std::future::ready(()))
        .await;
    ctx.metrics.set_leader(false);
    // Dropping the channel's receiver (with the follower) ends the lease task, which releases the
    // Lease so that another replica takes over without waiting for it to expire.
    follower.abort();
    let _ = follower.await;
    if tokio::time::timeout(LEASE_RELEASE_WAIT, lease_task)
        .await
        .is_err()
    {
        tracing::warn!("the Lease was not released in time: it expires by itself");
    }
    Ok(())
}
