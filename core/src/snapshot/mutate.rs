//! Changing a snapshot in place, as kube-scheduler's cache changes between cycles: a pod assumed on a
//! node, a pod deleted (a preemption victim), a nomination set or cleared, a pod added to the queue, a
//! node's object replaced (a cordon lifted), a node like another added (a checked "N more nodes").
//!
//! Each change updates every derived structure incrementally — the node's `NodeInfo` (requests,
//! ports, PVC counts, affinity lists), the lists of nodes with affinity pods, the affinity index when
//! it has been built, and the pod maps — so that a batch simulation costs one scheduling cycle per
//! pod, not a snapshot rebuild. The result is the snapshot [`Snapshot::new`] would build from the
//! changed objects (the simulation's property test checks that).
//!
//! Node order, and so kube-scheduler's rotating start index, never changes here (an added node goes last).

use std::sync::Arc;

use super::{NodeInfo, PodInfo, Snapshot, namespaced_key};

/// The node label that names the node itself.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Why a change could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutateError {
    /// The pod names a node the snapshot does not have.
    #[error("pod {pod}: node {node:?} is not in the snapshot")]
    UnknownNode {
        /// `namespace/name`.
        pod: String,
        /// The node named.
        node: String,
    },
    /// A node to replace is not in the snapshot.
    #[error("node {0:?} is not in the snapshot")]
    NoSuchNode(String),
    /// A pod to place has no `spec.nodeName`.
    #[error("pod {0}: no spec.nodeName to place it on")]
    NotPlaced(String),
}

impl Snapshot {
    /// Places `pod` (its `spec.nodeName` set) on its node, as kube-scheduler's `AssumePod` does: it
    /// leaves the pending pods and the nominations, and every per-node and cluster-wide count sees it.
    pub fn assume_pod(&mut self, pod: Arc<PodInfo>) -> Result<(), MutateError> {
        let node = pod.node_name();
        if node.is_empty() {
            return Err(MutateError::NotPlaced(pod.key()));
        }
        let Some(&position) = self.node_index.get(node) else {
            return Err(MutateError::UnknownNode {
                pod: pod.key(),
                node: node.to_string(),
            });
        };
        let key = pod.key();
        self.forget_pending(&key);
        Arc::make_mut(&mut self.nodes[position]).add_pod(pod.clone());
        self.refresh_node_lists(position);
        if let Some(index) = self.affinity_index.get_mut() {
            index.add(position, &self.nodes[position], &pod);
        }
        self.pods_by_key.insert(key, pod);
        Ok(())
    }

    /// Deletes a pod wherever it is (on a node, pending, nominated); returns it if it was there.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        let key = namespaced_key(namespace, name);
        let pod = self.pods_by_key.remove(&key)?;
        self.forget_pending(&key);
        if let Some(&position) = self.node_index.get(pod.node_name()) {
            let removed = Arc::make_mut(&mut self.nodes[position]).remove_pod(&pod);
            if removed.is_some() {
                self.refresh_node_lists(position);
                if let Some(index) = self.affinity_index.get_mut() {
                    index.remove(position, &pod);
                }
            }
        }
        Some(pod)
    }

    /// Adds a pod that is not on a node to the pending pods (and to its node's nominations when it has
    /// a `status.nominatedNodeName`), replacing a pod of the same name.
    pub fn add_pending_pod(&mut self, pod: Arc<PodInfo>) {
        let key = pod.key();
        if self.pods_by_key.contains_key(&key) {
            self.remove_pod(pod.namespace(), pod.name());
        }
        let nominated = pod.nominated_node_name();
        if !nominated.is_empty() {
            self.nominated_pods
                .entry(nominated.to_string())
                .or_default()
                .push(pod.clone());
        }
        self.pending_pods.push(pod.clone());
        self.pods_by_key.insert(key, pod);
    }

    /// Replaces a node's object (same name), keeping its pods: a cordon lifted, a label or taint
    /// changed. The affinity index, built from node labels, is rebuilt on next use.
    pub fn replace_node(&mut self, node: Arc<k8s_openapi::api::core::v1::Node>) -> Result<(), MutateError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(&position) = self.node_index.get(&name) else {
            return Err(MutateError::NoSuchNode(name));
        };
        let info = Arc::make_mut(&mut self.nodes[position]);
        info.allocatable = NodeInfo::new(node.clone()).allocatable;
        info.node = node;
        self.refresh_node_lists(position);
        self.affinity_index = Default::default();
        Ok(())
    }

    /// Adds an empty node `name` made from node `template`'s object (its allocatable, labels with
    /// `kubernetes.io/hostname` set to `name`, taints and images), after the last node: "one more
    /// node like this one". What other objects say about the template (its ResourceSlices, CSINode)
    /// is not copied. The affinity index is rebuilt on next use.
    pub fn add_node_like(&mut self, template: &str, name: &str) -> Result<(), MutateError> {
        let Some(&position) = self.node_index.get(template) else {
            return Err(MutateError::NoSuchNode(template.to_string()));
        };
        let source = &self.nodes[position];
        let mut node = (*source.node).clone();
        node.metadata.name = Some(name.to_string());
        node.metadata.uid = None;
        if let Some(labels) = node.metadata.labels.as_mut()
            && labels.contains_key(HOSTNAME_LABEL)
        {
            labels.insert(HOSTNAME_LABEL.to_string(), name.to_string());
        }
        let mut info = NodeInfo::new(Arc::new(node));
        info.image_states = source.image_states.clone();
        self.node_index.insert(name.to_string(), self.nodes.len());
        self.nodes.push(Arc::new(info));
        self.affinity_index = Default::default();
        Ok(())
    }

    /// Takes a pending pod out of the pending list and the nominations (it stays in `pods_by_key`).
    fn forget_pending(&mut self, key: &str) {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        let same = |p: &Arc<PodInfo>| p.name() == name && p.namespace() == namespace;
        if let Some(i) = self.pending_pods.iter().position(same) {
            self.pending_pods.remove(i);
        }
        self.nominated_pods.retain(|_, pods| {
            pods.retain(|p| !same(p));
            !pods.is_empty()
        });
    }

    /// Keeps the lists of nodes with affinity pods in step with node `position`'s new `NodeInfo`
    /// (they hold the node itself, so a changed node must replace its old entry).
    fn refresh_node_lists(&mut self, position: usize) {
        let node = self.nodes[position].clone();
        let refresh = |list: &mut Vec<Arc<NodeInfo>>, keep: bool| {
            let at = list.iter().position(|n| n.name() == node.name());
            match (at, keep) {
                (Some(i), true) => list[i] = node.clone(),
                (Some(i), false) => {
                    list.remove(i);
                }
                (None, true) => list.push(node.clone()),
                (None, false) => {}
            }
        };
        refresh(
            &mut self.have_pods_with_affinity,
            !node.pods_with_affinity.is_empty(),
        );
        refresh(
            &mut self.have_pods_with_required_anti_affinity,
            !node.pods_with_required_anti_affinity.is_empty(),
        );
    }
}
