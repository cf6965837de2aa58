//! A placement assumed in the snapshot (`backend/cache/snapshot.go`, `AssumePlacement`): the pod
//! group cycle under TopologyAwareWorkloadScheduling tries its group in one topology domain at a
//! time, and while it does, a pod's cycle filters and scores only the domain's nodes
//! (`ListNodesInPlacement`; "0/N nodes are available" counts them). Plugins still see every node
//! (PodTopologySpread's counts, inter-pod affinity): upstream limits only the candidates.
//!
//! The restriction is a set of node names, so it survives the pods the cycle assumes on the way.

use std::borrow::Cow;
use std::sync::Arc;

use super::{NameSet, NodeInfo, Snapshot};

impl Snapshot {
    /// This snapshot with scheduling limited to the nodes named in `nodes` (`AssumePlacement`);
    /// every node when `nodes` names them all (upstream treats that as no placement).
    pub fn with_placement<'a>(&self, nodes: impl IntoIterator<Item = &'a str>) -> Snapshot {
        let names: NameSet = nodes.into_iter().map(str::to_owned).collect();
        let mut limited = self.clone();
        limited.placement = (names.len() != self.nodes.len()).then(|| Arc::new(names));
        limited
    }

    /// This snapshot with `parent`'s placement assumed again (`AssumePlacement(parentPlacement)`
    /// once a composite group's child has been placed inside it).
    pub fn with_placement_of(&self, parent: &Snapshot) -> Snapshot {
        let mut limited = self.clone();
        limited.placement = parent.placement.clone();
        limited
    }

    /// Lifts the placement (`ForgetPlacement`): every node is a candidate again.
    pub fn forget_placement(&mut self) {
        self.placement = None;
    }

    /// The nodes a pod's cycle considers: the assumed placement's, or every node
    /// (`ListNodesInPlacement`), in the snapshot's order.
    pub fn nodes_in_placement(&self) -> Cow<'_, [Arc<NodeInfo>]> {
        match &self.placement {
            None => Cow::Borrowed(&self.nodes),
            Some(names) => Cow::Owned(
                self.nodes
                    .iter()
                    .filter(|n| names.contains(n.name()))
                    .cloned()
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::snapshot::ClusterObjects;
    use crate::testing::{node, pod, snapshot_of};

    /// (case, placement, nodes a pod's cycle considers)
    #[test]
    fn a_placement_limits_the_candidates_and_survives_assumed_pods() {
        let snapshot = snapshot_of(ClusterObjects {
            nodes: vec![node("a1").obj(), node("a2").obj(), node("b1").obj()],
            ..Default::default()
        });
        let cases: [(&str, &[&str], &[&str]); 3] = [
            ("one domain", &["a2", "a1"], &["a1", "a2"]),
            (
                "every node: no placement",
                &["b1", "a1", "a2"],
                &["a1", "a2", "b1"],
            ),
            ("a name that is no node", &["zz"], &[]),
        ];
        for (case, placement, expected) in cases {
            let mut limited = snapshot.with_placement(placement.iter().copied());
            let names = |s: &crate::snapshot::Snapshot| -> Vec<String> {
                s.nodes_in_placement()
                    .iter()
                    .map(|n| n.name().to_owned())
                    .collect()
            };
            assert_eq!(names(&limited), expected, "{case}");
            if let Some(first) = expected.first() {
                let placed = std::sync::Arc::new(crate::snapshot::PodInfo::new(pod("p").node(first).obj()));
                limited.assume_pod(placed).expect("assume");
                assert_eq!(names(&limited), expected, "{case}: after a pod is assumed");
            }
            assert_eq!(limited.nodes().len(), 3, "{case}: plugins still see every node");
        }
    }
}
