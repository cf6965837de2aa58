//! The trees of groups CompositePodGroup (alpha) makes: a PodGroup names its parent
//! CompositePodGroup (`spec.parentCompositePodGroupName`), a CompositePodGroup its own, up to
//! [`WORKLOAD_MAX_TREE_DEPTH`]. kube-scheduler's cache walks them up to the root
//! (`BuildHierarchySnapshotFromPod`) and its queue down to the leaves (`workloadForest`); GangScheduling
//! reads a tree's quorum, the pod group cycle schedules a tree whole.

use std::collections::BTreeSet;

use serde::Serialize;

use super::Snapshot;
use super::pod_groups::{
    WORKLOAD_MAX_TREE_DEPTH, composite_min_group_count, composite_topology_key, gang_min_count,
    parent_of_composite, parent_of_group,
};

/// `EntityKey`'s string (`compositepodgroup/NAMESPACE/NAME`), as kube-scheduler's errors print it.
fn composite_key(namespace: &str, name: &str) -> String {
    format!("compositepodgroup/{namespace}/{name}")
}

/// The root CompositePodGroup of the PodGroup `namespace/group`: `Ok(None)` when the group has no
/// parent; `Err` with `BuildHierarchySnapshotFromPod`'s words when a CompositePodGroup on the way up
/// does not exist.
pub fn root_of(snapshot: &Snapshot, namespace: &str, group: &str) -> Result<Option<String>, String> {
    let Some(mut current) = snapshot
        .pod_group(namespace, group)
        .and_then(|pg| parent_of_group(pg))
        .map(str::to_owned)
    else {
        return Ok(None);
    };
    for _ in 0..WORKLOAD_MAX_TREE_DEPTH - 1 {
        let Some(composite) = snapshot.composite_pod_group(namespace, &current) else {
            return Err(format!(
                "composite pod group object not found in state for {}",
                composite_key(namespace, &current)
            ));
        };
        match parent_of_composite(composite) {
            Some(parent) => current = parent.to_owned(),
            None => break,
        }
    }
    Ok(Some(current))
}

/// What a node of a tree is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind")]
pub enum TreeKind {
    /// A CompositePodGroup: `min_group_count` of its children must be placed.
    CompositePodGroup {
        /// Its gang policy's `minGroupCount` (1 without one).
        min_group_count: i32,
        /// Its topology key, when it must land in one domain.
        topology_key: Option<String>,
    },
    /// A PodGroup: `min_count` of its pods must be placed.
    PodGroup {
        /// Its gang policy's `minCount` (1 with the basic policy).
        min_count: i32,
    },
}

/// A node of a tree of groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreeNode {
    /// The group's name.
    pub name: String,
    /// What it is.
    #[serde(flatten)]
    pub kind: TreeKind,
    /// Its children, in name order (PodGroups and CompositePodGroups).
    pub children: Vec<TreeNode>,
}

impl TreeNode {
    /// Whether it is a CompositePodGroup.
    pub fn is_composite(&self) -> bool {
        matches!(self.kind, TreeKind::CompositePodGroup { .. })
    }

    /// The PodGroups of the subtree, depth first.
    pub fn leaves(&self) -> Vec<&TreeNode> {
        if !self.is_composite() {
            return vec![self];
        }
        self.children.iter().flat_map(TreeNode::leaves).collect()
    }
}

/// The tree under the CompositePodGroup `namespace/root` (`buildPodGroupInfoForCPG`): its children
/// are the PodGroups and CompositePodGroups naming it as their parent; a group met twice (a cycle)
/// is left out, as upstream does.
pub fn build_tree(snapshot: &Snapshot, namespace: &str, root: &str) -> Option<TreeNode> {
    let mut visited = BTreeSet::new();
    build_composite(snapshot, namespace, root, &mut visited)
}

fn build_composite(
    snapshot: &Snapshot,
    namespace: &str,
    name: &str,
    visited: &mut BTreeSet<(bool, String)>,
) -> Option<TreeNode> {
    let composite = snapshot.composite_pod_group(namespace, name)?;
    if !visited.insert((true, name.to_owned())) {
        return None;
    }
    let mut children = Vec::new();
    let mut groups: Vec<&str> = snapshot
        .pod_groups
        .values()
        .filter(|pg| pg.metadata.namespace.as_deref() == Some(namespace) && parent_of_group(pg) == Some(name))
        .filter_map(|pg| pg.metadata.name.as_deref())
        .collect();
    groups.sort_unstable();
    for group in groups {
        if visited.insert((false, group.to_owned())) {
            let min_count = snapshot
                .pod_group(namespace, group)
                .and_then(|pg| gang_min_count(pg))
                .unwrap_or(1);
            children.push(TreeNode {
                name: group.to_owned(),
                kind: TreeKind::PodGroup { min_count },
                children: Vec::new(),
            });
        }
    }
    let mut composites: Vec<&str> = snapshot
        .composite_pod_groups
        .values()
        .filter(|c| {
            c.metadata.namespace.as_deref() == Some(namespace) && parent_of_composite(c) == Some(name)
        })
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    composites.sort_unstable();
    for child in composites {
        if let Some(node) = build_composite(snapshot, namespace, child, visited) {
            children.push(node);
        }
    }
    children.sort_by(|a, b| a.name.cmp(&b.name));
    Some(TreeNode {
        name: name.to_owned(),
        kind: TreeKind::CompositePodGroup {
            min_group_count: composite_min_group_count(composite),
            topology_key: composite_topology_key(composite).map(str::to_owned),
        },
        children,
    })
}

/// `isCPGTreeReady` / `isPGReady`: whether `count` of each PodGroup reaches its `minCount` in
/// enough children, recursively, for the tree under `node` to reach its quorum.
pub fn tree_ready(node: &TreeNode, count: &dyn Fn(&str) -> usize) -> bool {
    match &node.kind {
        TreeKind::PodGroup { min_count } => count(&node.name) >= usize::try_from(*min_count).unwrap_or(0),
        TreeKind::CompositePodGroup { min_group_count, .. } => {
            let ready = node.children.iter().filter(|c| tree_ready(c, count)).count();
            ready >= usize::try_from(*min_group_count).unwrap_or(0)
        }
    }
}
