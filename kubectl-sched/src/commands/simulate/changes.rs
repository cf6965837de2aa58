//! The changes `simulate` makes to the loaded cluster before the run, in memory: `-f` inputs expanded
//! into pods, `--drain`, `--remove-node`, `--cordon`, `--add-nodes`, and `--set` on the simulated pods.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use sched_core::framework::FeatureGates;
use sched_core::simulate::drain::{DisruptionBudgets, DrainOptions, plan_drain};
use sched_core::simulate::workloads::{
    ExpandContext, POD_TEMPLATE_HASH_LABEL, WorkloadObject, WorkloadsError, check_expansion_total, expand,
    expanded_pod_count,
};
use sched_core::snapshot::ClusterObjects;
use sched_core::snapshot::load::{BadQuantity, check_node, check_pod, check_pvc};

use super::SimulateError;
use super::pod_groups::{GroupInputs, take_group_input};
use super::progress::Progress;
use super::report::{KeptPod, NodeChange, Origin};
use crate::source::what_if::{Applied, WhatIf};

pub(super) fn find_node<'a>(
    objects: &'a mut ClusterObjects,
    name: &str,
    flag: &'static str,
) -> Result<&'a mut Node, SimulateError> {
    objects
        .nodes
        .iter_mut()
        .find(|n| n.metadata.name.as_deref() == Some(name))
        .ok_or_else(|| SimulateError::NodeNotFound {
            flag,
            node: name.to_string(),
        })
}

/// `kubectl cordon`: spec.unschedulable.
pub(super) fn cordon(
    objects: &mut ClusterObjects,
    name: &str,
    flag: &'static str,
) -> Result<(), SimulateError> {
    find_node(objects, name, flag)?
        .spec
        .get_or_insert_with(Default::default)
        .unschedulable = Some(true);
    Ok(())
}

pub(super) fn key_of(pod: &Pod) -> String {
    sched_core::snapshot::namespaced_key(
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or(""),
    )
}

/// `--drain NODE`: cordon, then evict as planned; replacements join the pods.
pub(super) fn drain(
    objects: &mut ClusterObjects,
    node: &str,
    options: &DrainOptions,
    budgets: &mut DisruptionBudgets,
    origins: &mut HashMap<String, Origin>,
) -> Result<NodeChange, SimulateError> {
    cordon(objects, node, "--drain")?;
    let plan = plan_drain(objects, node, options, budgets)?;
    let evicted: HashSet<String> = plan.evicted.iter().map(key_of).collect();
    objects.pods.retain(|p| !evicted.contains(&key_of(p)));
    let replacements: Vec<String> = plan.replacements.iter().map(key_of).collect();
    for key in &replacements {
        origins.insert(key.clone(), Origin::Replacement);
    }
    objects.pods.extend(plan.replacements);
    let mut evicted: Vec<String> = evicted.into_iter().collect();
    evicted.sort();
    Ok(NodeChange {
        node: node.to_string(),
        action: "drain",
        evicted,
        replacements,
        kept: plan
            .kept
            .iter()
            .map(|(pod, reason)| KeptPod {
                pod: key_of(pod),
                reason: reason.to_string(),
            })
            .collect(),
    })
}

/// `--remove-node NODE`: the node and its pods go; what their controllers recreate is queued. A
/// removed machine's pods are not evicted: PodDisruptionBudgets and kubectl drain's filters do not
/// apply, and DaemonSet pods go with the node.
pub(super) fn remove_node(
    objects: &mut ClusterObjects,
    node: &str,
    origins: &mut HashMap<String, Origin>,
) -> Result<NodeChange, SimulateError> {
    find_node(objects, node, "--remove-node")?;
    let options = DrainOptions {
        force: true,
        delete_emptydir_data: true,
    };
    // Unlimited budgets: nothing blocks a machine from disappearing.
    let mut budgets = DisruptionBudgets::new(&[]);
    let plan = plan_drain(objects, node, &options, &mut budgets)?;
    let on_node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
    let mut evicted: Vec<String> = objects.pods.iter().filter(|p| on_node(p)).map(key_of).collect();
    evicted.sort();
    objects.pods.retain(|p| !on_node(p));
    objects.nodes.retain(|n| n.metadata.name.as_deref() != Some(node));
    objects
        .csi_nodes
        .retain(|n| n.metadata.name.as_deref() != Some(node));
    let replacements: Vec<String> = plan.replacements.iter().map(key_of).collect();
    for key in &replacements {
        origins.insert(key.clone(), Origin::Replacement);
    }
    objects.pods.extend(plan.replacements);
    Ok(NodeChange {
        node: node.to_string(),
        action: "remove",
        evicted,
        replacements,
        kept: Vec::new(),
    })
}

/// Reads a YAML or JSON file (or stdin for `-`) as JSON values: every document, every item of a List.
pub(super) fn read_documents(path: &Path) -> Result<(String, Vec<serde_json::Value>), SimulateError> {
    let (shown, text) = crate::source::pods::read_file_or_stdin(path)
        .map_err(|(path, message)| SimulateError::Input { path, message })?;
    let invalid = |message: String| SimulateError::Input {
        path: shown.clone(),
        message,
    };
    // JSON read as JSON; YAML behind the snapshot loader's flow depth guard.
    let documents = sched_core::snapshot::load::read_documents(&text).map_err(|e| invalid(e.to_string()))?;
    let mut values = Vec::new();
    for (i, mut value) in documents.into_iter().enumerate() {
        match value.get("kind").and_then(serde_json::Value::as_str) {
            _ if value.is_null() => {}
            Some(kind) if kind.ends_with("List") => match value.get_mut("items").map(serde_json::Value::take)
            {
                Some(serde_json::Value::Array(items)) => values.extend(items),
                Some(serde_json::Value::Null) | None => {}
                Some(_) => return Err(invalid(format!("document {i}: items is not a list"))),
            },
            Some(_) => values.push(value),
            None => return Err(invalid(format!("document {i} has no kind"))),
        }
    }
    Ok((shown, values))
}

/// One object of a `-f` file, decoded and its quantities checked, with the file it came from.
pub(super) struct Input {
    /// The file as the user named it (`<stdin>` for `-`).
    path: String,
    object: WorkloadObject,
}

/// `-f FILE...`: every object of every file, decoded and checked, before any is expanded; the
/// workload API's PodGroups and Workloads apart.
pub(super) fn read_inputs(
    paths: &[PathBuf],
    namespace: &str,
) -> Result<(Vec<Input>, GroupInputs), SimulateError> {
    let mut inputs = Vec::new();
    let mut groups = GroupInputs::default();
    for path in paths {
        let (shown, values) = read_documents(path)?;
        for (document, value) in values.into_iter().enumerate() {
            if take_group_input(&mut groups, &value, namespace, (&shown, document))?.is_some() {
                continue;
            }
            let object = WorkloadObject::from_value(value).map_err(|source| SimulateError::Workload {
                path: shown.clone(),
                source,
            })?;
            check_quantities(&object, namespace).map_err(|bad| SimulateError::Input {
                path: shown.clone(),
                message: bad.to_string(),
            })?;
            inputs.push(Input {
                path: shown.clone(),
                object,
            });
        }
    }
    Ok((inputs, groups))
}

fn expand_context<'o>(
    objects: &'o ClusterObjects,
    namespace: &'o str,
    replicas: Option<i32>,
    now: &Time,
    features: &FeatureGates,
) -> ExpandContext<'o> {
    ExpandContext {
        nodes: &objects.nodes,
        priority_classes: &objects.priority_classes,
        persistent_volume_claims: &objects.persistent_volume_claims,
        default_namespace: namespace,
        replicas,
        creation_timestamp: now.clone(),
        features: *features,
    }
}

/// How many pods the inputs expand into, refused past `limit` before any is built (40 workloads of
/// 150,000 replicas would otherwise take minutes and gigabytes).
pub(super) fn count_pods(
    objects: &ClusterObjects,
    inputs: &[Input],
    namespace: &str,
    replicas: Option<i32>,
    limit: usize,
    features: &FeatureGates,
) -> Result<usize, SimulateError> {
    let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let context = expand_context(objects, namespace, replicas, &now, features);
    check_expansion_total(inputs.iter().map(|i| &i.object), &context, limit).map_err(|source| match source {
        WorkloadsError::TooManyPods { .. } => SimulateError::TooManyPods { source },
        // An object that cannot be expanded: named with its file, as the expansion would.
        source => {
            let path = inputs
                .iter()
                .find(|i| expanded_pod_count(&i.object, &context).is_err())
                .map(|i| i.path.clone())
                .unwrap_or_default();
            SimulateError::Workload { path, source }
        }
    })
}

/// `-f FILE`: the inputs' pods join the cluster as pending pods (and new claims of StatefulSets as
/// claims); returns their keys. `progress` hears of every pod built, out of `total`.
pub(super) fn add_inputs(
    objects: &mut ClusterObjects,
    inputs: Vec<Input>,
    namespace: &str,
    replicas: Option<i32>,
    now: &Time,
    features: &FeatureGates,
    (progress, total): (&Progress, usize),
) -> Result<Vec<String>, SimulateError> {
    // Once, not per pod: a million pods checked against each other one by one would take hours.
    let mut existing: HashSet<String> = objects.pods.iter().map(key_of).collect();
    let mut keys = Vec::new();
    for Input { path, object } in inputs {
        let context = expand_context(objects, namespace, replicas, now, features);
        let expansion = expand(&object, &context).map_err(|source| SimulateError::Workload {
            path: path.clone(),
            source,
        })?;
        add_controller(objects, &object, &expansion.pods, namespace);
        for mut pod in expansion.pods {
            sched_core::admission::admit(&mut pod, &objects.priority_classes).map_err(|e| {
                SimulateError::Input {
                    path: path.clone(),
                    message: format!("{}: {e}", key_of(&pod)),
                }
            })?;
            let key = key_of(&pod);
            if !existing.insert(key.clone()) {
                return Err(SimulateError::Input {
                    path: path.clone(),
                    message: format!("pod {key} already exists in the cluster"),
                });
            }
            keys.push(key);
            objects.pods.push(pod);
            progress.expanding(keys.len(), total);
        }
        objects.persistent_volume_claims.extend(expansion.claims);
    }
    Ok(keys)
}

/// The first bad quantity of a `-f` object, checked as the snapshot loaders check theirs (the API
/// server refuses `cpu: oops`, which the engine would count as 0): a bare pod's own fields; a
/// workload's pod template under `spec.template.` and a StatefulSet's claim templates under
/// `spec.volumeClaimTemplates[i].`, named with the workload (its pods do not exist yet).
fn check_quantities(object: &WorkloadObject, namespace: &str) -> Result<(), BadQuantity> {
    let (meta, spec) = match object {
        WorkloadObject::Pod(pod) => {
            let mut pod = pod.clone();
            pod.metadata
                .namespace
                .get_or_insert_with(|| namespace.to_string());
            return check_pod(&pod);
        }
        WorkloadObject::Deployment(d) => (&d.metadata, d.spec.template.spec.clone()),
        WorkloadObject::ReplicaSet(r) => (&r.metadata, r.spec.template.as_ref().and_then(|t| t.spec.clone())),
        WorkloadObject::StatefulSet(s) => (&s.metadata, s.spec.template.spec.clone()),
        WorkloadObject::Job(j) => (
            &j.metadata,
            j.spec.as_ref().and_then(|s| s.template.spec.as_ref()).cloned(),
        ),
        WorkloadObject::DaemonSet(d) => (&d.metadata, d.spec.template.spec.clone()),
    };
    let named = |mut bad: BadQuantity, field: &str| {
        bad.kind = object.kind();
        bad.field = format!("{field}.{}", bad.field);
        bad
    };
    let meta = ObjectMeta {
        name: meta.name.clone(),
        namespace: Some(meta.namespace.clone().unwrap_or_else(|| namespace.to_string())),
        ..ObjectMeta::default()
    };
    let pod = Pod {
        metadata: meta.clone(),
        spec,
        ..Pod::default()
    };
    check_pod(&pod).map_err(|bad| named(bad, "spec.template"))?;
    if let WorkloadObject::StatefulSet(set) = object {
        let claims = set.spec.volume_claim_templates.as_ref();
        for (i, claim) in claims.into_iter().flatten().enumerate() {
            let mut claim = claim.clone();
            claim.metadata = meta.clone();
            check_pvc(&claim).map_err(|bad| named(bad, &format!("spec.volumeClaimTemplates[{i}]")))?;
        }
    }
    Ok(())
}

/// The object kube-scheduler's default spreading selects an expanded workload's pods by (its
/// ReplicaSet for a Deployment, the ReplicaSet or StatefulSet itself): PodTopologySpread's system
/// default constraints spread the pods of a ReplicaSet or StatefulSet found in the cluster, so
/// without it a rollout's replicas would be packed instead of spread. A Deployment's ReplicaSet is
/// the one its pods name as their owner, selecting by the Deployment's selector and the
/// pod-template-hash, as the deployment controller makes it.
fn add_controller(objects: &mut ClusterObjects, object: &WorkloadObject, pods: &[Pod], namespace: &str) {
    use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    let in_namespace = |meta: &ObjectMeta| {
        meta.namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| namespace.to_string())
    };
    let exists = |list: &[ReplicaSet], meta: &ObjectMeta, ns: &str| {
        list.iter()
            .any(|r| r.metadata.name == meta.name && r.metadata.namespace.as_deref() == Some(ns))
    };
    match object {
        WorkloadObject::ReplicaSet(rs) => {
            let ns = in_namespace(&rs.metadata);
            if !exists(&objects.replica_sets, &rs.metadata, &ns) {
                let mut rs = rs.clone();
                rs.metadata.namespace = Some(ns);
                objects.replica_sets.push(rs);
            }
        }
        WorkloadObject::StatefulSet(set) => {
            let ns = in_namespace(&set.metadata);
            let known = objects.stateful_sets.iter().any(|s| {
                s.metadata.name == set.metadata.name && s.metadata.namespace.as_deref() == Some(&ns)
            });
            if !known {
                let mut set = set.clone();
                set.metadata.namespace = Some(ns);
                objects.stateful_sets.push(set);
            }
        }
        WorkloadObject::Deployment(deployment) => {
            let ns = in_namespace(&deployment.metadata);
            // The ReplicaSet the expanded pods name as their controller, and their template hash.
            let Some((name, hash)) = pods.iter().find_map(|p| {
                let owner = p
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .find(|o| o.controller == Some(true) && o.kind == "ReplicaSet")?;
                let hash = p.metadata.labels.as_ref()?.get(POD_TEMPLATE_HASH_LABEL)?;
                Some((owner.name.clone(), hash.clone()))
            }) else {
                return;
            };
            let meta = ObjectMeta {
                name: Some(name),
                namespace: Some(ns.clone()),
                ..Default::default()
            };
            if exists(&objects.replica_sets, &meta, &ns) {
                return;
            }
            let spec = &deployment.spec;
            let mut selector = spec.selector.clone();
            selector
                .match_labels
                .get_or_insert_with(Default::default)
                .insert(POD_TEMPLATE_HASH_LABEL.to_string(), hash);
            objects.replica_sets.push(ReplicaSet {
                metadata: ObjectMeta {
                    owner_references: Some(vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "Deployment".into(),
                        name: deployment.metadata.name.clone().unwrap_or_default(),
                        uid: deployment.metadata.uid.clone().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..meta
                },
                spec: ReplicaSetSpec {
                    selector,
                    replicas: spec.replicas,
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        WorkloadObject::Pod(_) | WorkloadObject::Job(_) | WorkloadObject::DaemonSet(_) => {}
    }
}

/// `--add-nodes FILE`: its Nodes join the cluster.
pub(super) fn add_nodes(objects: &mut ClusterObjects, path: &Path) -> Result<Applied, SimulateError> {
    let (shown, values) = read_documents(path)?;
    let mut names = Vec::new();
    for (i, value) in values.into_iter().enumerate() {
        if value.get("kind").and_then(serde_json::Value::as_str) != Some("Node") {
            return Err(SimulateError::Input {
                path: shown,
                message: format!("object {i} is not a Node"),
            });
        }
        let node: Node = serde_json::from_value(value).map_err(|e| SimulateError::Input {
            path: shown.clone(),
            message: format!("object {i}: Node: {e}"),
        })?;
        // As a snapshot's nodes: `cpu: oops` in allocatable would otherwise count as no room at all.
        check_node(&node).map_err(|bad| SimulateError::Input {
            path: shown.clone(),
            message: bad.to_string(),
        })?;
        let name = node.metadata.name.clone().unwrap_or_default();
        if name.is_empty()
            || objects
                .nodes
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some(&name))
        {
            return Err(SimulateError::Input {
                path: shown,
                message: format!("object {i}: node {name:?} has no name or already exists"),
            });
        }
        names.push(name);
        objects.nodes.push(node);
    }
    Ok(Applied {
        flag: "--add-nodes",
        value: shown,
        effect: format!("added {}", names.join(", ")),
    })
}

/// `--set` on the pods of -f, or without -f on every pending pod of the namespace.
pub(super) fn apply_set(
    what_if: &WhatIf,
    objects: &mut ClusterObjects,
    inputs: &[String],
    namespace: &str,
) -> Result<Vec<Applied>, SimulateError> {
    let inputs: HashSet<&String> = inputs.iter().collect();
    let priority_classes = objects.priority_classes.clone();
    let mut effects = Vec::new();
    let mut changed = 0;
    for pod in objects.pods.iter_mut().filter(|p| {
        let pending = p
            .spec
            .as_ref()
            .is_none_or(|s| s.node_name.as_deref().unwrap_or("").is_empty());
        if inputs.is_empty() {
            pending && p.metadata.namespace.as_deref() == Some(namespace)
        } else {
            inputs.contains(&key_of(p))
        }
    }) {
        effects = what_if.apply_to_pod(pod, &priority_classes)?;
        changed += 1;
    }
    Ok(effects
        .into_iter()
        .map(|mut a| {
            a.effect = format!("{} (on each of {changed} pod(s))", a.effect);
            a
        })
        .collect())
}
