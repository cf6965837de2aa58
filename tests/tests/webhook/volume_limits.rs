//! (k) NodeVolumeLimits counts a node's VolumeAttachments when the webhook checks nominations.
//!
//! The webhook clears the nomination of a lower-priority pod nominated to a node once a pod is bound
//! there and the nominated pod no longer fits (kube-scheduler's PreFilter/Filter). Upstream
//! `CSILimits.Filter` counts every VolumeAttachment of a CSI driver to the node, including volumes no
//! pod on the node uses any more (still attached after their pod left), against the node's CSINode
//! `allocatable.count`. Here the attachments are created through the real kube-apiserver and reach the
//! webhook through its VolumeAttachment watch.
//!
//! Three nodes, each with a CSINode limit for one driver and a pending pod nominated there whose claim
//! is bound to a volume of that driver; then a higher-priority pod is bound to each node through
//! `pods/binding`, as kube-scheduler binds a preemptor:
//!
//! | node | CSINode limit | VolumeAttachments | the nominated pod's volume | nomination |
//! |---|---|---|---|---|
//! | n0 | 1 | none | 1 of 1 | kept |
//! | n1 | 2 | one, of a volume no pod uses | 2 of 2 | kept |
//! | n2 | 1 | one, of a volume no pod uses | 2 of 1 | cleared |
//!
//! No kube-scheduler runs here: it would schedule the nominated pods (which fit elsewhere) or rewrite
//! their nominations, and the test is about what the webhook alone does. No attach/detach controller
//! runs either: it would detach (delete) attachments no pod needs.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Binding, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use e2e::fixtures::{TEST_LABEL, eventually, ready_node};
use e2e::{ControlPlane, Options};
use sched_webhook::admission::{ClusterView, Operation};
use sched_webhook::metrics::RequestOutcome;

use super::{GRACE, PAUSE, SETUP_TIMEOUT, from_json, labelled_namespace, start_webhook};

/// The CSI driver of every volume here (no driver runs: only the objects matter).
const DRIVER: &str = "e2e.csi.kubectl-sched.dev";
/// The priority of the pods bound to the nodes; the nominated pods have none (0).
const HIGH: &str = "e2e-high";
/// How long the webhook gets to clear a stale nomination after the binding is stored.
const CLEAR_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// One node of the scenario.
struct Case {
    /// The node's CSINode `allocatable.count` for [`DRIVER`].
    limit: i32,
    /// Whether a volume no pod uses is attached to the node (a VolumeAttachment).
    attached: bool,
    /// Whether the nominated pod no longer fits there: its nomination must be cleared.
    stale: bool,
}

const CASES: [Case; 3] = [
    // Room for the nominated pod's volume.
    Case {
        limit: 1,
        attached: false,
        stale: false,
    },
    // The attachment and the nominated pod's volume make 2 of 2: still room.
    Case {
        limit: 2,
        attached: true,
        stale: false,
    },
    // The attachment fills the limit: kube-scheduler's `node(s) exceed max volume count`.
    Case {
        limit: 1,
        attached: true,
        stale: true,
    },
];

/// A CSI PV of [`DRIVER`], pre-bound to `claim` in `ns` when given.
fn csi_pv(name: &str, ns: &str, handle: &str, claim: Option<&str>) -> Value {
    let mut pv = json!({
        "metadata": {"name": name, "labels": {TEST_LABEL: ns}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": {"driver": DRIVER, "volumeHandle": handle},
        },
    });
    if let Some(claim) = claim {
        pv["spec"]["claimRef"] = json!({"namespace": ns, "name": claim});
    }
    pv
}

/// A pod nobody binds on its own (no scheduler runs), with claim `claim` and PriorityClass
/// `priority_class` when given.
fn pending_pod(name: &str, claim: Option<&str>, priority_class: Option<&str>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": "100m"}}}],
        },
    });
    if let Some(claim) = claim {
        pod["spec"]["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
    }
    if let Some(class) = priority_class {
        pod["spec"]["priorityClassName"] = json!(class);
    }
    pod
}

#[tokio::test]
async fn k_a_volume_attachment_filling_the_csi_limit_clears_a_nomination_to_that_node() -> Result<()> {
    let cp =
        ControlPlane::start(Options::new().with_controller_manager(&["persistentvolume-binder"])).await?;
    let webhook = start_webhook(&cp, 1, "sched-webhook-e2e-k").await?;
    let ns = labelled_namespace(&cp, "wh-k", &[]).await?;
    let client = cp.client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    let csi_nodes: Api<CSINode> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let post = PostParams::default();
    Api::<PriorityClass>::all(client.clone())
        .create(
            &post,
            &from_json(json!({"metadata": {"name": HIGH}, "value": 1000}))?,
        )
        .await?;

    let node_name = |i: usize| format!("{ns}-n{i}");
    for (i, case) in CASES.iter().enumerate() {
        let node = node_name(i);
        nodes
            .create(&post, &ready_node(&node, &ns, "8", "16Gi", "110"))
            .await?;
        let csi_node = json!({
            "metadata": {"name": node},
            "spec": {"drivers": [{"name": DRIVER, "nodeID": node, "allocatable": {"count": case.limit}}]},
        });
        csi_nodes.create(&post, &from_json(csi_node)?).await?;
        let claim = format!("c{i}");
        pvs.create(
            &post,
            &from_json(csi_pv(
                &format!("{ns}-vol{i}"),
                &ns,
                &format!("vol{i}"),
                Some(&claim),
            ))?,
        )
        .await?;
        let pvc = json!({
            "metadata": {"name": claim},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": format!("{ns}-vol{i}"),
                "resources": {"requests": {"storage": "1Gi"}},
            },
        });
        claims.create(&post, &from_json(pvc)?).await?;
        if case.attached {
            // A volume still attached to the node, used by no pod (its pod left; no detach yet).
            let left = format!("{ns}-left{i}");
            pvs.create(&post, &from_json(csi_pv(&left, &ns, &format!("left{i}"), None))?)
                .await?;
            let attachment = json!({
                "metadata": {"name": format!("{ns}-va{i}")},
                "spec": {"attacher": DRIVER, "nodeName": node, "source": {"persistentVolumeName": left}},
            });
            attachments.create(&post, &from_json(attachment)?).await?;
        }
        let low = format!("low{i}");
        pods.create(&post, &from_json(pending_pod(&low, Some(&claim), None))?)
            .await?;
        // As a previous preemption would have left it.
        pods.patch_status(
            &low,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nominatedNodeName": node}})),
        )
        .await?;
        pods.create(
            &post,
            &from_json(pending_pod(&format!("high{i}"), None, Some(HIGH)))?,
        )
        .await?;
    }

    // The webhook decides once per binding, on its cache: everything must be there before the bindings.
    let cache = webhook.replicas[0].cache.clone();
    eventually(
        "the webhook's cache to hold the scenario",
        SETUP_TIMEOUT,
        || async {
            let snapshot = cache.volume_snapshot();
            let ready = CASES.iter().enumerate().all(|(i, case)| {
                let node = node_name(i);
                let claim_bound = snapshot
                    .persistent_volume_claims
                    .get(&format!("{ns}/c{i}"))
                    .is_some_and(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"));
                let attached = snapshot.volume_attachments.get(&node).map_or(0, Vec::len);
                let left_known =
                    !case.attached || snapshot.persistent_volumes.contains_key(&format!("{ns}-left{i}"));
                let nominated = cache
                    .nominated_pods(&node)
                    .iter()
                    .any(|p| p.metadata.name.as_deref() == Some(format!("low{i}").as_str()));
                claim_bound
                    && snapshot.csi_nodes.contains_key(&node)
                    && attached == usize::from(case.attached)
                    && left_known
                    && nominated
                    && cache.pod(&ns, &format!("high{i}")).is_some()
            });
            Ok(ready.then_some(()))
        },
    )
    .await?;
    webhook.leader().await?;
    let metrics = webhook.replicas[0].metrics.clone();
    let cleared_before = metrics.nominations_cleared();
    let bindings_before = metrics.requests(Operation::PodBinding, RequestOutcome::Allowed);

    // Bound as kube-scheduler binds a preemptor once its victims are gone.
    for i in 0..CASES.len() {
        let binding: Binding = from_json(json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": format!("high{i}"), "namespace": ns},
            "target": {"kind": "Node", "name": node_name(i)},
        }))?;
        let _: Value = pods
            .create_subresource("binding", &format!("high{i}"), &post, &binding)
            .await?;
    }

    let nomination = |name: String| {
        let pods = pods.clone();
        async move {
            let pod = pods.get(&name).await?;
            anyhow::Ok(pod.status.and_then(|s| s.nominated_node_name).unwrap_or_default())
        }
    };
    for (i, case) in CASES.iter().enumerate().filter(|(_, c)| c.stale) {
        eventually(
            &format!("the webhook to clear low{i}'s nomination to {}", node_name(i)),
            CLEAR_TIMEOUT,
            || async { Ok(nomination(format!("low{i}")).await?.is_empty().then_some(())) },
        )
        .await
        .with_context(|| format!("case {i}: limit {}, attached {}", case.limit, case.attached))?;
    }
    // The bindings of the other nodes were looked at in the same moments: give a late (wrong) clearing
    // the time to land before looking.
    tokio::time::sleep(GRACE).await;
    let mut outcome = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let nominated = nomination(format!("low{i}")).await?;
        let want = if case.stale { String::new() } else { node_name(i) };
        ensure!(
            nominated == want,
            "low{i} (limit {}, attached {}): nominated to {nominated:?}, expected {want:?}",
            case.limit,
            case.attached
        );
        let bound = pods
            .get(&format!("high{i}"))
            .await?
            .spec
            .and_then(|s| s.node_name);
        ensure!(
            bound.as_deref() == Some(node_name(i).as_str()),
            "high{i} bound to {bound:?}"
        );
        outcome.push(format!(
            "limit {} attached {}: {}",
            case.limit,
            case.attached,
            if case.stale { "cleared" } else { "kept" }
        ));
    }
    // The pods without volumes above were admitted (the matchCondition leaves them out without an
    // evaluation error, which this configuration's `failurePolicy: Fail` would make a refusal), and
    // every binding was sent.
    let bindings = metrics.requests(Operation::PodBinding, RequestOutcome::Allowed) - bindings_before;
    ensure!(
        bindings == CASES.len() as u64,
        "{bindings} bindings admitted by the webhook, expected {}",
        CASES.len()
    );
    let cleared = metrics.nominations_cleared() - cleared_before;
    let stale = CASES.iter().filter(|c| c.stale).count() as u64;
    ensure!(
        cleared == stale,
        "{cleared} nominations cleared, expected {stale}"
    );
    println!("(k) {ns}: {}", outcome.join("; "));
    Ok(())
}
