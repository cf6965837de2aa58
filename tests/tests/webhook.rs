//! sched-webhook against the real control plane: the real kube-apiserver calls the webhook over TLS
//! (registered by URL on 127.0.0.1 with its caBundle), kube-controller-manager's PV binder completes
//! the bindings the webhook starts, and the real kube-scheduler places the pods.
//!
//! The webhook replicas run in this process, each on its own port, in a runtime of their own (a test's
//! runtime ends with the test). Two replicas serve the shared control plane: pods labelled
//! `e2e.kubectl-sched.dev/replica: b` go to the second, everything else (bindings included) to the
//! first. Only namespaces labelled `e2e.kubectl-sched.dev/webhook: on` are sent to the webhook.
//!
//! Scenarios: (a) pods created with spec.nodeName get their WaitForFirstConsumer claims bound or
//! provisioned for that node; (b) opted-in pods are pre-bound once stored and kube-scheduler follows
//! the affinity patch; (c) with VolumeBinding disabled in kube-scheduler, volumes are bound at
//! pods/binding; (d) a binding to a node that cannot reach the PV is denied with the reason;
//! (e) dryRun=All changes nothing; (f) two replicas, 200 concurrent pods, 100 PVs: each PV claimed
//! once, by the Lease holder; (g)-(i) what the API server never stored leaves nothing behind: a
//! forged review sent straight to the port, a forged binding of a real pending pod, a pod rejected
//! by validation after the webhook; (j) writes through a slow API server (a proxy adding 25 ms per
//! chunk): a pod with 1,200 claims is skipped and counted, one with 60 gets every claim bound over
//! several cut-short plans; (k, `volume_limits`) a VolumeAttachment filling a node's CSI attach limit
//! makes the webhook clear a lower-priority nomination to that node when a pod is bound there.
//!
//! Admission writes nothing; each replica also runs the controller that writes for stored pods, and
//! only the replica holding the Lease does.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use e2e::fixtures::TEST_LABEL;
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::{Binding, PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_core::labels::Selector;
use sched_core::volumes::{ANN_SELECTED_NODE, ERR_REASON_BIND_CONFLICT, NOT_SUPPORTED_PROVISIONER};
use sched_webhook::admission::{OPT_IN_KEY, OPT_IN_VALUE, Operation};
use sched_webhook::controller::ControllerConfig;
use sched_webhook::metrics::RequestOutcome;
use sched_webhook::run::{Replica, ReplicaClients};
use sched_webhook::server::{AppState, Limits};

#[path = "webhook/volume_limits.rs"]
mod volume_limits;

#[path = "webhook/harness.rs"]
mod harness;
use harness::*;

#[tokio::test]
async fn a_node_name_pods_get_their_claims_bound_or_provisioned_for_that_node() -> Result<()> {
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-a", &[]).await?;
    f.nodes(2).await?;
    f.local_pv(&format!("{}-pv0", f.ns), 0).await?;
    f.local_pv(&format!("{}-pv1", f.ns), 1).await?;
    f.claim("c1", &f.class).await?;
    webhook
        .wait_available(&[format!("{}-pv0", f.ns), format!("{}-pv1", f.ns)])
        .await?;

    let mut pod = pod_with_claim("p1", "c1");
    pod["spec"]["nodeName"] = json!(f.node_name(1));
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    let volume = f.bound_volume("c1").await?;
    ensure!(
        volume == format!("{}-pv1", f.ns),
        "claim bound to {volume}, expected the PV of node 1"
    );
    ensure!(
        f.claim_ref(&format!("{}-pv0", f.ns)).await?.is_none(),
        "the other node's PV stays free"
    );

    // A WaitForFirstConsumer class with a provisioner: the claim is handed to it for that node.
    let dynamic = format!("{}-dyn", f.ns);
    let classes: Api<StorageClass> = Api::all(f.client.clone());
    classes
        .create(
            &PostParams::default(),
            &from_json(json!({
                "metadata": {"name": dynamic},
                "provisioner": "e2e.kubectl-sched.dev/no-such-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }))?,
        )
        .await?;
    f.claim("d1", &dynamic).await?;
    let mut pod = pod_with_claim("p2", "d1");
    pod["spec"]["nodeName"] = json!(f.node_name(0));
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    // The controller annotates the claim once the API server has stored the pod.
    let claims = f.claims();
    let selected = eventually("the claim to name the pod's node", BIND_TIMEOUT, || async {
        let claim = claims.get("d1").await?;
        Ok(claim
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANN_SELECTED_NODE)
            .cloned())
    })
    .await?;
    ensure!(selected == f.node_name(0), "selected-node: {selected:?}");
    ensure!(webhook.bindings() >= 2);
    println!(
        "(a) {}/c1 bound to {volume}; {}/d1 selected-node {:?}",
        f.ns, f.ns, selected
    );
    Ok(())
}

#[tokio::test]
async fn b_opted_in_pods_are_prebound_and_placed_on_the_pvs_node() -> Result<()> {
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-b", &[]).await?;
    f.nodes(3).await?;
    // Only node 2 has a PV.
    f.local_pv(&format!("{}-pv2", f.ns), 2).await?;
    f.claim("c1", &f.class).await?;
    webhook.wait_available(&[format!("{}-pv2", f.ns)]).await?;
    let mut pod = pod_with_claim("p", "c1");
    pod["metadata"]["annotations"] = json!({OPT_IN_KEY: OPT_IN_VALUE});
    pod["spec"]["nodeSelector"] = json!({TEST_LABEL: f.ns});
    let created = f.pods().create(&PostParams::default(), &from_json(pod)?).await?;

    // The patch is in the stored pod: required affinity to the PV's node, the nodeSelector kept.
    let affinity = serde_json::to_value(
        created
            .spec
            .as_ref()
            .and_then(|s| s.affinity.clone())
            .context("no affinity patched in")?,
    )?;
    let terms =
        &affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    ensure!(
        terms.to_string().contains(&f.node_name(2)),
        "affinity does not name the PV's node: {terms}"
    );
    // Pre-bound once stored (by the controller, or by kube-scheduler's own VolumeBinding if it was
    // quicker: the patched affinity leaves it the same PV).
    let pv2 = format!("{}-pv2", f.ns);
    eventually("the PV to be claimed", BIND_TIMEOUT, || async {
        Ok((f.claim_ref(&pv2).await?.as_deref() == Some(format!("{}/c1", f.ns).as_str())).then_some(()))
    })
    .await?;
    let pods = f.pods();
    let node = eventually("kube-scheduler to bind the pod", BIND_TIMEOUT, || async {
        Ok(pods.get("p").await?.spec.and_then(|s| s.node_name))
    })
    .await
    .with_context(|| cp.log_tail("kube-scheduler", 20))?;
    ensure!(node == f.node_name(2), "scheduled to {node}");
    let volume = f.bound_volume("c1").await?;
    ensure!(volume == format!("{}-pv2", f.ns));
    println!(
        "(b) {}/p pre-bound to {volume} once stored, kube-scheduler placed it on {node}",
        f.ns
    );
    Ok(())
}

#[tokio::test]
async fn c_volumes_are_bound_at_pods_binding_when_the_scheduler_skips_volume_binding() -> Result<()> {
    // A scheduler profile without VolumeBinding stands in for a custom scheduler.
    let cp = ControlPlane::start(
        Options::new()
            .with_scheduler(Some(
                "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled:\n      - name: VolumeBinding\n",
            ))
            .with_controller_manager(&["persistentvolume-binder"]),
    )
    .await?;
    let webhook = start_webhook(&cp, 1, "sched-webhook-e2e-c").await?;
    let f = Fixture::new(&cp, "wh-c", &[]).await?;
    f.nodes(2).await?;
    f.local_pv(&format!("{}-pv0", f.ns), 0).await?;
    f.local_pv(&format!("{}-pv1", f.ns), 1).await?;
    webhook
        .wait_available(&[format!("{}-pv0", f.ns), format!("{}-pv1", f.ns)])
        .await?;
    for i in 0..2 {
        f.claim(&format!("c{i}"), &f.class).await?;
        let mut pod = pod_with_claim(&format!("p{i}"), &format!("c{i}"));
        pod["spec"]["nodeSelector"] = json!({TEST_LABEL: f.ns});
        // One pod per node, so each node's PV is needed exactly once.
        pod["metadata"]["labels"] = json!({"app": "c"});
        pod["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "c"}}, "topologyKey": HOST}
        ]}});
        f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    }
    for i in 0..2 {
        let pods = f.pods();
        let name = format!("p{i}");
        let node = eventually("kube-scheduler to bind the pod", BIND_TIMEOUT, || async {
            Ok(pods.get(&name).await?.spec.and_then(|s| s.node_name))
        })
        .await
        .with_context(|| cp.log_tail("kube-scheduler", 20))?;
        let volume = f.bound_volume(&format!("c{i}")).await?;
        let expected = format!("{}-pv{}", f.ns, node.rsplit("-n").next().unwrap_or_default());
        ensure!(
            volume == expected,
            "pod on {node} got {volume}, expected {expected}"
        );
        println!(
            "(c) {}/{name} bound to {node} by kube-scheduler without VolumeBinding; claim bound to {volume} at pods/binding",
            f.ns
        );
    }
    ensure!(
        webhook.replicas[0]
            .metrics
            .requests(Operation::PodBinding, RequestOutcome::Allowed)
            >= 2
    );
    Ok(())
}

#[tokio::test]
async fn d_a_binding_to_a_node_that_cannot_reach_the_pv_is_denied() -> Result<()> {
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-d", &[]).await?;
    f.nodes(2).await?;
    f.local_pv(&format!("{}-pv0", f.ns), 0).await?;
    f.claim("c1", &f.class).await?;
    webhook.wait_available(&[format!("{}-pv0", f.ns)]).await?;
    let mut pod = pod_with_claim("p", "c1");
    // No scheduler picks this pod up: the test binds it by hand.
    pod["spec"]["schedulerName"] = json!("e2e-nobody");
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    // Wait until the webhook's cache has the pod (else it reads it from the API, also fine).
    let binding = |node: String| -> Result<Binding> {
        from_json(json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p", "namespace": f.ns},
            "target": {"kind": "Node", "name": node},
        }))
    };
    let denied: Result<Value, _> = f
        .pods()
        .create_subresource("binding", "p", &PostParams::default(), &binding(f.node_name(1))?)
        .await;
    let err = match denied {
        Ok(v) => bail!("binding to the wrong node was admitted: {v}"),
        Err(kube::Error::Api(status)) => status,
        Err(e) => bail!("unexpected error: {e}"),
    };
    ensure!(
        err.message.contains(ERR_REASON_BIND_CONFLICT),
        "message: {}",
        err.message
    );
    ensure!(
        err.message.contains("denied the request"),
        "message: {}",
        err.message
    );
    ensure!(f.pods().get("p").await?.spec.and_then(|s| s.node_name).is_none());
    ensure!(
        f.claim_ref(&format!("{}-pv0", f.ns)).await?.is_none(),
        "a denied binding claims nothing"
    );
    println!("(d) denied: {}", err.message);

    let _: Value = f
        .pods()
        .create_subresource("binding", "p", &PostParams::default(), &binding(f.node_name(0))?)
        .await?;
    let volume = f.bound_volume("c1").await?;
    ensure!(volume == format!("{}-pv0", f.ns));
    ensure!(
        webhook.replicas[0]
            .metrics
            .requests(Operation::PodBinding, RequestOutcome::Denied)
            >= 1
    );
    Ok(())
}

#[tokio::test]
async fn e_dry_run_creates_change_nothing() -> Result<()> {
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-e", &[]).await?;
    f.nodes(1).await?;
    f.local_pv(&format!("{}-pv0", f.ns), 0).await?;
    f.claim("c1", &f.class).await?;
    webhook.wait_available(&[format!("{}-pv0", f.ns)]).await?;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut on_node = pod_with_claim("p1", "c1");
    on_node["spec"]["nodeName"] = json!(f.node_name(0));
    f.pods().create(&dry, &from_json(on_node)?).await?;
    let mut opted_in = pod_with_claim("p2", "c1");
    opted_in["metadata"]["annotations"] = json!({OPT_IN_KEY: OPT_IN_VALUE});
    opted_in["spec"]["nodeSelector"] = json!({TEST_LABEL: f.ns});
    let preview = f.pods().create(&dry, &from_json(opted_in)?).await?;
    // The dry-run answer shows what admission would do (the affinity patch)...
    ensure!(
        preview.spec.and_then(|s| s.affinity).is_some(),
        "dry-run shows the patch"
    );
    // ...and nothing happened.
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        f.claim_ref(&format!("{}-pv0", f.ns)).await?.is_none(),
        "dry-run bound a PV"
    );
    let claim = f.claims().get("c1").await?;
    ensure!(claim.spec.and_then(|s| s.volume_name).is_none());
    ensure!(
        !claim
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ANN_SELECTED_NODE)
    );
    ensure!(f.pods().list(&ListParams::default()).await?.items.is_empty());
    println!("(e) dry-run pod creates in {} left PV and claim untouched", f.ns);
    Ok(())
}

#[tokio::test]
async fn f_two_replicas_two_hundred_concurrent_pods_one_hundred_pvs() -> Result<()> {
    const NODES: usize = 5;
    const PODS: usize = 200;
    const PVS: usize = 100;
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-f", &[]).await?;
    f.nodes(NODES).await?;
    for i in 0..PVS {
        f.local_pv(&format!("{}-pv{i:03}", f.ns), i % NODES).await?;
    }
    for i in 0..PODS {
        f.claim(&format!("c{i:03}"), &f.class).await?;
    }
    // Let both replicas' caches see the volumes, Available.
    let names: Vec<String> = (0..PVS).map(|i| format!("{}-pv{i:03}", f.ns)).collect();
    webhook.wait_available(&names).await?;
    eventually("the replicas to cache the claims", SETUP_TIMEOUT, || async {
        Ok(webhook
            .replicas
            .iter()
            .all(|r| {
                use sched_webhook::admission::ClusterView;
                r.cache.pvc(&f.ns, &format!("c{:03}", PODS - 1)).is_some()
            })
            .then_some(()))
    })
    .await?;
    let leader = webhook.leader().await?;
    let before: Vec<u64> = webhook.replicas.iter().map(|r| r.metrics.bindings()).collect();

    // 200 pods at once, 40 per node for 20 PVs per node, alternating replicas.
    let pods = f.pods();
    let started = Instant::now();
    let creates = (0..PODS).map(|i| {
        let pods = pods.clone();
        let mut pod = pod_with_claim(&format!("p{i:03}"), &format!("c{i:03}"));
        pod["spec"]["nodeName"] = json!(f.node_name(i % NODES));
        pod["metadata"]["labels"] = json!({REPLICA_LABEL: replica_name(i % 2)});
        async move {
            let pod: Pod = from_json(pod)?;
            pods.create(&PostParams::default(), &pod)
                .await
                .map_err(anyhow::Error::from)
        }
    });
    let results = futures::future::join_all(creates).await;
    let admitted = started.elapsed();
    // A pod is denied only once its node's PVs are all taken (a definite conflict, the scheduler's
    // reason); nothing else may fail.
    let denied: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    for message in &denied {
        ensure!(
            message.contains(ERR_REASON_BIND_CONFLICT),
            "wrongly denied: {message}"
        );
    }

    let pvs: Api<PersistentVolume> = Api::all(f.client.clone());
    let selector = format!("{TEST_LABEL}={}", f.ns);
    eventually("all 100 PVs to be claimed", BIND_TIMEOUT, || async {
        let list = pvs.list(&ListParams::default().labels(&selector)).await?;
        let claimed = list
            .items
            .iter()
            .filter(|pv| pv.spec.as_ref().is_some_and(|s| s.claim_ref.is_some()))
            .count();
        Ok((claimed == PVS).then_some(()))
    })
    .await?;
    // Let any late (wrong) write land before looking.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let list = pvs.list(&ListParams::default().labels(&selector)).await?;
    let mut claimed = BTreeSet::new();
    for pv in &list.items {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let claim = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.name.clone())
            .with_context(|| format!("PV {name} is not claimed"))?;
        ensure!(claimed.insert(claim.clone()), "claim {claim} holds two PVs");
        // The claim's pod runs on the PV's node.
        let pod_index: usize = claim.trim_start_matches('c').parse()?;
        let pv_index: usize = name.rsplit("pv").next().unwrap_or_default().parse()?;
        ensure!(
            pod_index % NODES == pv_index % NODES,
            "claim {claim} (pod on node {}) bound to {name} on node {}",
            pod_index % NODES,
            pv_index % NODES
        );
    }
    ensure!(claimed.len() == PVS, "{} of {PVS} PVs claimed", claimed.len());
    // Every claim is bound to at most one PV, and only the Lease holder wrote.
    let claims = f.claims().list(&ListParams::default()).await?;
    let bound = claims
        .items
        .iter()
        .filter(|c| c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_some())
        .count();
    ensure!(bound <= PVS, "{bound} claims name a volume");
    let writes: Vec<u64> = webhook
        .replicas
        .iter()
        .zip(&before)
        .map(|(r, b)| r.metrics.bindings() - b)
        .collect();
    for (i, w) in writes.iter().enumerate() {
        ensure!(
            (i == leader) == (*w > 0),
            "only the leader (replica {leader}) writes: {writes:?}"
        );
    }
    println!(
        "(f) {PODS} pods admitted in {:.2} s by 2 replicas ({} denied: no PV left on their node); {PVS} PVs claimed once each, all written by replica {leader} ({writes:?})",
        admitted.as_secs_f64(),
        denied.len()
    );
    Ok(())
}

impl Fixture {
    /// `nodes` nodes, a free local PV on the first, an unbound claim `c1` that could use it, every
    /// replica's cache holding them and a controller leading: what a forged request would go for.
    async fn one_free_pv(webhook: &Webhook, prefix: &str, nodes: usize) -> Result<(Fixture, String)> {
        let cp = ControlPlane::shared().await?;
        let f = Fixture::new(cp, prefix, &[]).await?;
        f.nodes(nodes).await?;
        let pv = format!("{}-pv0", f.ns);
        f.local_pv(&pv, 0).await?;
        f.claim("c1", &f.class).await?;
        webhook.wait_available(std::slice::from_ref(&pv)).await?;
        webhook.leader().await?;
        Ok((f, pv))
    }
}

/// Sends `review` straight to replica `replica`'s port over TLS (trusting the webhook's CA), as anyone
/// who reaches the port could, and returns the AdmissionReview it answers.
async fn forge(webhook: &Webhook, replica: usize, review: &Value) -> Result<Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::pem::PemObject::from_pem_slice(webhook.ca_cert_pem.as_bytes())
        .context("webhook CA")?;
    roots.add(ca)?;
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", webhook.ports[replica])).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?.to_owned();
    let mut tls = connector.connect(name, tcp).await?;
    let body = review.to_string();
    let request = format!(
        "POST /mutate?timeout=5s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    tokio::time::timeout(SETUP_TIMEOUT, tls.read_to_end(&mut response)).await??;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP body")?;
    ensure!(head.starts_with("HTTP/1.1 200"), "answer: {head}");
    Ok(serde_json::from_str(body)?)
}

fn forged_review(uid: &str, namespace: &str, sub_resource: &str, name: &str, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": if sub_resource.is_empty() { "Pod" } else { "Binding" }},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": sub_resource,
            "name": name, "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "mallory"},
            "object": object,
        }
    })
}

/// Long enough for the controller to have acted on anything stored (it acts within milliseconds).
const GRACE: Duration = Duration::from_secs(4);

#[tokio::test]
async fn g_a_forged_review_for_a_pod_never_stored_claims_nothing() -> Result<()> {
    let (_, webhook) = shared().await?;
    let (f, pv) = Fixture::one_free_pv(webhook, "wh-g", 1).await?;
    let mut pod = pod_with_claim("never-stored", "c1");
    pod["metadata"]["namespace"] = json!(f.ns);
    pod["spec"]["nodeName"] = json!(f.node_name(0));
    let answer = forge(
        webhook,
        0,
        &forged_review("forged-g", &f.ns, "", "never-stored", pod),
    )
    .await?;
    ensure!(answer["response"]["allowed"] == json!(true), "{answer}");
    tokio::time::sleep(GRACE).await;
    ensure!(
        f.claim_ref(&pv).await?.is_none(),
        "a pod that never existed claimed {pv}"
    );
    let claim = f.claims().get("c1").await?;
    ensure!(claim.spec.and_then(|s| s.volume_name).is_none(), "claim bound");
    println!(
        "(g) forged review for {}/never-stored answered, nothing written",
        f.ns
    );
    Ok(())
}

#[tokio::test]
async fn h_a_forged_binding_of_a_pending_pod_claims_nothing_and_keeps_its_nomination() -> Result<()> {
    let (_, webhook) = shared().await?;
    let (f, pv) = Fixture::one_free_pv(webhook, "wh-h", 2).await?;
    let mut pod = pod_with_claim("p", "c1");
    // No scheduler picks this pod up: it stays pending.
    pod["spec"]["schedulerName"] = json!("e2e-nobody");
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    f.pods()
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nominatedNodeName": f.node_name(1)}})),
        )
        .await?;
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
                         "metadata": {"name": "p", "namespace": f.ns},
                         "target": {"kind": "Node", "name": f.node_name(0)}});
    let answer = forge(
        webhook,
        0,
        &forged_review("forged-h", &f.ns, "binding", "p", binding),
    )
    .await?;
    ensure!(answer["response"]["allowed"] == json!(true), "{answer}");
    tokio::time::sleep(GRACE).await;
    ensure!(f.claim_ref(&pv).await?.is_none(), "a forged binding claimed {pv}");
    let stored = f.pods().get("p").await?;
    ensure!(stored.spec.and_then(|s| s.node_name).is_none(), "pod bound");
    let nominated = stored.status.and_then(|s| s.nominated_node_name);
    ensure!(
        nominated.as_deref() == Some(f.node_name(1).as_str()),
        "nomination changed: {nominated:?}"
    );
    println!(
        "(h) forged binding of {}/p answered, PV free, nomination kept",
        f.ns
    );
    Ok(())
}

#[tokio::test]
async fn i_a_pod_rejected_by_validation_after_the_webhook_claims_nothing() -> Result<()> {
    let (_, webhook) = shared().await?;
    let (f, pv) = Fixture::one_free_pv(webhook, "wh-i", 1).await?;
    let called = || {
        webhook
            .replicas
            .iter()
            .map(|r| {
                r.metrics
                    .requests(Operation::PodCreateNodeName, RequestOutcome::Patched)
                    + r.metrics
                        .requests(Operation::PodCreateNodeName, RequestOutcome::Allowed)
            })
            .sum::<u64>()
    };
    let before = called();
    let mut pod = pod_with_claim("invalid", "c1");
    pod["spec"]["nodeName"] = json!(f.node_name(0));
    // Mutating admission runs before validation: this name passes the webhook and fails validation.
    pod["spec"]["containers"][0]["name"] = json!("Not_A_DNS_Label");
    let err = match f.pods().create(&PostParams::default(), &from_json(pod)?).await {
        Ok(_) => bail!("the invalid pod was stored"),
        Err(kube::Error::Api(status)) => status,
        Err(e) => bail!("unexpected error: {e}"),
    };
    ensure!(
        err.code == 422,
        "expected 422 Invalid, got {}: {}",
        err.code,
        err.message
    );
    ensure!(called() > before, "the webhook was not called before validation");
    tokio::time::sleep(GRACE).await;
    ensure!(f.claim_ref(&pv).await?.is_none(), "a rejected pod claimed {pv}");
    println!(
        "(i) {}/invalid rejected after the webhook ({}): PV free",
        f.ns, err.code
    );
    Ok(())
}

#[tokio::test]
async fn j_a_slow_api_server_leaves_nothing_half_done() -> Result<()> {
    const CLAIMS: usize = 60;
    // On the shared control plane, beside the other tests' pods, PVs, claims and replicas, as in
    // production. (It once needed a control plane of its own: its replica won its Lease while its pod
    // list was still running and never reported its caches synced, the lost wake-up `cache`'s module
    // docs describe.)
    let (cp, _webhook) = shared().await?;
    // Not labelled for the shared replicas: only this test's replica serves the namespace.
    let ns = cp.new_namespace("wh-j").await?;
    let client = cp.client()?;
    let f = Fixture {
        client: client.clone(),
        ns: ns.clone(),
        class: format!("{ns}-local"),
    };
    let classes: Api<StorageClass> = Api::all(client.clone());
    classes
        .create(
            &PostParams::default(),
            &from_json(
                json!({"metadata": {"name": f.class}, "provisioner": NOT_SUPPORTED_PROVISIONER,
                              "volumeBindingMode": "WaitForFirstConsumer"}),
            )?,
        )
        .await?;
    f.nodes(1).await?;
    for batch in (0..CLAIMS).collect::<Vec<_>>().chunks(50) {
        futures::future::try_join_all(batch.iter().map(|i| {
            let f = &f;
            async move {
                f.local_pv(&format!("{}-pv{i:03}", f.ns), 0).await?;
                f.claim(&format!("c{i:03}"), &f.class).await
            }
        }))
        .await?;
    }

    // The replica's writes go through a proxy that holds every chunk a client sends 25 ms (60 claims
    // take about 12 s), with 2 s per plan: each plan is cut short and finished by a later reconcile.
    let upstream: std::net::SocketAddr = cp
        .server_url()
        .trim_start_matches("https://")
        .parse()
        .context("the API server's address")?;
    let mut config = controller_config(&format!("sched-webhook-e2e-j-{ns}"), 0);
    config.scope.namespaces =
        Selector::from_map(&[("kubernetes.io/metadata.name".to_string(), ns.clone())].into());
    config.plan_budget = Duration::from_secs(2);
    let replica = SlowReplica::start(cp.config().clone(), upstream, config)?;
    let (state, metrics) = (replica.state.clone(), replica.state.metrics.clone());
    eventually("the replica to sync and lead", SETUP_TIMEOUT, || async {
        Ok((state.cache.is_ready() && metrics.is_leader()).then_some(()))
    })
    .await
    .with_context(|| {
        format!(
            "caches synced: {}, leads: {}",
            state.cache.is_ready(),
            metrics.is_leader()
        )
    })?;

    // More claims than are considered: left to the scheduler, counted, nothing read or written.
    let mut huge = pod_with_claim("huge", "c000");
    huge["spec"]["nodeName"] = json!(f.node_name(0));
    huge["spec"]["volumes"] = json!(
        (0..1_200)
            .map(|i| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": format!("c{i:04}")}}))
            .collect::<Vec<_>>()
    );
    f.pods().create(&PostParams::default(), &from_json(huge)?).await?;
    eventually("the 1,200-claim pod to be skipped", SETUP_TIMEOUT, || async {
        let text = metrics.render(true);
        Ok(text.contains("sched_webhook_pods_skipped_total 1").then_some(()))
    })
    .await?;
    ensure!(metrics.bindings() == 0, "writes for a pod that was skipped");
    f.pods().delete("huge", &Default::default()).await?;

    let mut pod = pod_with_claim("slow", "c000");
    pod["spec"]["nodeName"] = json!(f.node_name(0));
    pod["spec"]["volumes"] = json!(
        (0..CLAIMS)
            .map(|i| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": format!("c{i:03}")}}))
            .collect::<Vec<_>>()
    );
    let started = Instant::now();
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let selector = format!("{TEST_LABEL}={ns}");
    eventually(
        "every claim of the slow pod to get its PV",
        BIND_TIMEOUT,
        || async {
            let list = pvs.list(&ListParams::default().labels(&selector)).await?;
            let claimed = list
                .items
                .iter()
                .filter(|pv| pv.spec.as_ref().is_some_and(|s| s.claim_ref.is_some()))
                .count();
            Ok((claimed == CLAIMS).then_some(()))
        },
    )
    .await
    .with_context(|| {
        format!(
            "{} writes counted, {} plans cut short or failed; leads: {}",
            metrics.bindings(),
            metrics.plan_failures(),
            metrics.is_leader()
        )
    })?;
    let took = started.elapsed();
    let list = pvs.list(&ListParams::default().labels(&selector)).await?;
    let claims: BTreeSet<String> = list
        .items
        .iter()
        .filter_map(|pv| pv.spec.as_ref()?.claim_ref.as_ref()?.name.clone())
        .collect();
    ensure!(
        claims.len() == CLAIMS,
        "{} distinct claims hold the {CLAIMS} PVs",
        claims.len()
    );
    ensure!(
        metrics.bindings() == CLAIMS as u64,
        "{} writes counted for {CLAIMS} claims",
        metrics.bindings()
    );
    ensure!(
        metrics.plan_failures() >= 1,
        "the 2 s plan budget never ran out: the test proves nothing"
    );
    println!(
        "(j) 25 ms per request: {CLAIMS} claims bound in {:.1} s over {} cut-short plans, {} writes counted; the 1,200-claim pod skipped, nothing written for it",
        took.as_secs_f64(),
        metrics.plan_failures(),
        metrics.bindings()
    );
    replica.stop();
    Ok(())
}

/// Test j's replica: its writes through a [`e2e::latency::LatencyProxy`] that holds every chunk 25 ms,
/// its caches and Lease over the direct client (as in production each has its own connections),
/// all on a runtime of its own — as `sched-webhook serve` runs — so that the test's polling never
/// competes with it for the test's single thread.
struct SlowReplica {
    state: Arc<AppState>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SlowReplica {
    fn start(direct: kube::Config, upstream: std::net::SocketAddr, config: ControllerConfig) -> Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("sched-webhook-slow".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("replica runtime");
                runtime.block_on(async move {
                    let proxy =
                        match e2e::latency::LatencyProxy::start(upstream, Duration::from_millis(25)).await {
                            Ok(proxy) => proxy,
                            Err(e) => {
                                let _ = tx.send(Err(anyhow::anyhow!("starting the latency proxy: {e}")));
                                return;
                            }
                        };
                    let mut slow = direct.clone();
                    let clients = proxy.url().parse().map_err(anyhow::Error::from).and_then(|url| {
                        slow.cluster_url = url;
                        Ok((Client::try_from(direct)?, Client::try_from(slow)?))
                    });
                    let (client, slow) = match clients {
                        Ok(clients) => clients,
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    };
                    let replica = Replica::start(
                        ReplicaClients {
                            watch: client.clone(),
                            write: slow,
                            lease: client,
                        },
                        SchedulerConfig::default_config(&in_tree_registry()),
                        Limits::default(),
                        config,
                    );
                    let stopped = replica.stopped();
                    let _ = tx.send(Ok((replica.state.clone(), replica.stop_handle())));
                    stopped.await;
                    replica.stop().await;
                    drop(proxy);
                });
            })?;
        let (state, stop) = rx.recv_timeout(SETUP_TIMEOUT)??;
        Ok(SlowReplica {
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the replica (it releases its Lease) and waits for its runtime to end.
    fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
