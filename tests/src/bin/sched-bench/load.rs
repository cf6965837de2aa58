//! Loading a generated cluster into the real kube-apiserver: every object created with bounded
//! concurrency over loopback, then its status written where the scheduler reads it (nodes'
//! allocatable, bound PVs and PVCs, PDB budgets, the running pods' realistic status, so lists are
//! as large as a real cluster's).
//!
//! Fields the API server refuses or recomputes on create are cleared first: resourceVersion,
//! managedFields, a pod's `priority`/`preemptionPolicy` (Priority admission fills them from the
//! class and refuses a mismatch) and a Service's cluster IP (the harness's service range has 254
//! addresses; headless Services select pods just the same).

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use sched_core::testing::generate::{GenerateParams, Generated, for_each_object};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Requests in flight at once while loading.
const CONCURRENCY: usize = 48;
/// Attempts per request: the API server answers 429 when its inflight limit is reached.
const ATTEMPTS: usize = 5;

/// The generated cluster, split by what the benchmark does with it.
#[derive(Default)]
pub struct Cluster {
    /// Everything but the pending pods, in creation order (namespaces and classes first).
    pub objects: Vec<Generated>,
    /// Pods without a node: the batch both schedulers work on.
    pub pending: Vec<Pod>,
}

impl Cluster {
    pub fn generate(params: &GenerateParams) -> Self {
        let mut cluster = Cluster::default();
        for_each_object(params, |object| match object {
            Generated::Pod(pod) if pod.spec.as_ref().is_none_or(|s| s.node_name.is_none()) => {
                cluster.pending.push(pod)
            }
            other => cluster.objects.push(other),
        });
        cluster
    }

    pub fn bound_pods(&self) -> usize {
        self.objects
            .iter()
            .filter(|o| matches!(o, Generated::Pod(_)))
            .count()
    }
}

/// How loading went.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LoadFigures {
    /// Objects created (status writes not counted).
    pub objects: usize,
    /// Requests that failed after every attempt.
    pub failed: usize,
    pub seconds: f64,
}

/// Creates every object of `cluster.objects` (not the pending pods), kind by kind.
pub async fn load(client: &Client, cluster: &Cluster) -> LoadFigures {
    let started = Instant::now();
    let failed = AtomicUsize::new(0);
    let created = AtomicUsize::new(0);
    let total = cluster.objects.len();
    // Kinds in dependency order: a pod's namespace and PriorityClass must exist before it.
    let rank = |o: &Generated| match o {
        Generated::Namespace(_) => 0,
        Generated::PriorityClass(_) | Generated::StorageClass(_) | Generated::CSIDriver(_) => 1,
        _ => 2,
    };
    for stage in 0..=2 {
        let objects = cluster.objects.iter().filter(|o| rank(o) == stage);
        futures::stream::iter(objects)
            .for_each_concurrent(CONCURRENCY, |object| {
                let (client, failed, created) = (client.clone(), &failed, &created);
                async move {
                    if let Err(e) = create_generated(&client, object).await
                        && failed.fetch_add(1, Ordering::Relaxed) < 5
                    {
                        eprintln!("sched-bench: loading: {e}");
                    }
                    let done = created.fetch_add(1, Ordering::Relaxed) + 1;
                    if done % 5_000 == 0 {
                        eprintln!(
                            "sched-bench: loaded {done}/{total} objects in {:.0} s",
                            started.elapsed().as_secs_f64()
                        );
                    }
                }
            })
            .await;
    }
    LoadFigures {
        objects: total,
        failed: failed.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Creates the pending pods (scheduler stopped), returning how many failed.
pub async fn create_pending(client: &Client, pods: &[Pod]) -> usize {
    let failed = AtomicUsize::new(0);
    futures::stream::iter(pods)
        .for_each_concurrent(CONCURRENCY, |pod| {
            let (client, failed) = (client.clone(), &failed);
            async move {
                let mut pod = pod.clone();
                clear_pod(&mut pod);
                pod.status = None;
                if let Err(e) = create_namespaced(&client, &pod, None).await
                    && failed.fetch_add(1, Ordering::Relaxed) < 5
                {
                    eprintln!("sched-bench: creating pending pods: {e}");
                }
            }
        })
        .await;
    failed.load(Ordering::Relaxed)
}

/// Deletes the batch (bound or not, immediately: grace period 0) and creates it pending again, for
/// another kube-scheduler run on the same batch (scheduler stopped). Returns how many creations failed.
pub async fn recreate_pending(client: &Client, pods: &[Pod]) -> usize {
    futures::stream::iter(pods)
        .for_each_concurrent(CONCURRENCY, |pod| {
            let client = client.clone();
            async move {
                let api: Api<Pod> = Api::namespaced(client, &pod.namespace().unwrap_or_default());
                let (name, now) = (pod.name_any(), DeleteParams::default().grace_period(0));
                let _ = retry(&name, || api.delete(&name, &now)).await;
            }
        })
        .await;
    create_pending(client, pods).await
}

async fn create_generated(client: &Client, object: &Generated) -> Result<(), String> {
    match object.clone() {
        Generated::Namespace(o) => create_cluster_scoped(client, o, false).await,
        Generated::PriorityClass(o) => create_cluster_scoped(client, o, false).await,
        Generated::StorageClass(o) => create_cluster_scoped(client, o, false).await,
        Generated::CSIDriver(o) => create_cluster_scoped(client, o, false).await,
        Generated::Node(o) => create_cluster_scoped(client, o, true).await,
        Generated::CSINode(o) => create_cluster_scoped(client, o, false).await,
        Generated::PersistentVolume(o) => create_cluster_scoped(client, o, true).await,
        Generated::ReplicaSet(o) => create_namespaced(client, &o, None).await,
        Generated::StatefulSet(o) => create_namespaced(client, &o, None).await,
        Generated::Service(mut o) => {
            if let Some(spec) = o.spec.as_mut() {
                spec.cluster_ip = Some("None".into());
                spec.cluster_ips = None;
            }
            create_namespaced::<Service>(client, &o, None).await
        }
        Generated::PodDisruptionBudget(o) => {
            let status = status_of(&o);
            create_namespaced(client, &o, status).await
        }
        Generated::PersistentVolumeClaim(o) => {
            let status = status_of(&o);
            create_namespaced(client, &o, status).await
        }
        Generated::Pod(mut pod) => {
            clear_pod(&mut pod);
            let status = status_of(&pod);
            create_namespaced(client, &pod, status).await
        }
    }
}

fn clear_pod(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        spec.priority = None;
        spec.preemption_policy = None;
    }
}

/// The object's `status`, as a merge patch body.
fn status_of<K: Serialize>(object: &K) -> Option<serde_json::Value> {
    let value = serde_json::to_value(object).ok()?;
    let status = value.get("status")?.clone();
    (!status.is_null()).then(|| serde_json::json!({ "status": status }))
}

fn for_create<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.resource_version = None;
    meta.managed_fields = None;
    meta.creation_timestamp = None;
    meta.uid = None;
}

async fn create_cluster_scoped<K>(client: &Client, mut object: K, with_status: bool) -> Result<(), String>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let status = with_status.then(|| status_of(&object)).flatten();
    for_create(&mut object);
    let api: Api<K> = Api::all(client.clone());
    create_with_status(&api, &object, status).await
}

async fn create_namespaced<K>(
    client: &Client,
    object: &K,
    status: Option<serde_json::Value>,
) -> Result<(), String>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let mut object = object.clone();
    for_create(&mut object);
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    create_with_status(&api, &object, status).await
}

async fn create_with_status<K>(
    api: &Api<K>,
    object: &K,
    status: Option<serde_json::Value>,
) -> Result<(), String>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let name = object.name_any();
    let post = PostParams::default();
    match retry(&name, || api.create(&post, object)).await {
        // `default` and `kube-system` exist from the start.
        Err(e) if e.ends_with("(409)") => return Ok(()),
        other => other?,
    };
    if let Some(status) = status {
        let (params, patch) = (PatchParams::default(), Patch::Merge(&status));
        retry(&name, || api.patch_status(&name, &params, &patch)).await?;
    }
    Ok(())
}

/// Retries what the API server may refuse for load (429, 5xx, connection errors) with a short
/// backoff; other errors (a refused object) are final.
async fn retry<T, F, Fut>(name: &str, mut request: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(100);
    for attempt in 1..=ATTEMPTS {
        match request().await {
            Ok(value) => return Ok(value),
            Err(kube::Error::Api(status)) if status.code != 429 && status.code < 500 => {
                return Err(format!("{name}: {} ({})", status.message, status.code));
            }
            Err(e) if attempt == ATTEMPTS => return Err(format!("{name}: {e}")),
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
    Err(format!("{name}: no attempt made"))
}
