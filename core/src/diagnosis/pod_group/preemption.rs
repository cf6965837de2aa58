//! The group's preemption as a report shows it (`explain podgroup/NAME`, a gang pod's "Pod group"
//! section, `preempt podgroup/NAME`): PodGroupPostFilter's words, and the victims node by node —
//! kube-scheduler logs neither the victims nor the nodes of a group preemption, only their count.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Nomination;
use crate::preemption::pod_group::{GroupPreemption, GroupPreemptionOutcome, VictimKind};

/// What PodGroupPostFilter decides for a group that cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupPreemptionView {
    /// How it ended.
    pub outcome: GroupPreemptionOutcome,
    /// Its words, as kube-scheduler appends them to the group's status ("pod group preemption: …").
    pub message: String,
    /// The victims, node by node (by node name; on each node most important first).
    pub nodes: Vec<NodeVictims>,
    /// How many pods are preempted.
    pub num_victims: usize,
    /// How many of them violate a PodDisruptionBudget.
    pub num_pdb_violations: usize,
    /// How many victims are pod groups (`numPodGroupDisruptions`: a whole group with
    /// `disruptionMode: All` counts once, a pod of a group once each).
    pub num_pod_group_disruptions: usize,
    /// Where each pod of the group is nominated.
    pub nominations: Vec<Nomination>,
}

/// The victims on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeVictims {
    /// The node.
    pub node: String,
    /// Its victims.
    pub victims: Vec<GroupVictimPod>,
}

/// One pod preempted for the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupVictimPod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// The priority it is weighed with (its PodGroup's when it has one).
    pub priority: i32,
    /// A pod, or a pod of a pod group.
    pub kind: VictimKind,
    /// `namespace/name` of its PodGroup when the whole group goes with it (`disruptionMode: All`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub whole_group: Option<String>,
    /// True when preempting its victim (the pod, or its whole group) violates a PodDisruptionBudget.
    pub pdb_violation: bool,
}

impl GroupPreemptionView {
    /// The view of `preemption`.
    pub fn of(preemption: &GroupPreemption) -> Self {
        let mut by_node: BTreeMap<String, Vec<GroupVictimPod>> = BTreeMap::new();
        for victim in &preemption.victims {
            for pod in &victim.pods {
                by_node
                    .entry(pod.node_name().to_string())
                    .or_default()
                    .push(GroupVictimPod {
                        namespace: pod.namespace().to_string(),
                        name: pod.name().to_string(),
                        uid: pod.uid().to_string(),
                        priority: victim.priority,
                        kind: victim.kind,
                        whole_group: victim.whole_group.clone(),
                        pdb_violation: victim.pdb_violations > 0,
                    });
            }
        }
        GroupPreemptionView {
            outcome: preemption.outcome,
            message: preemption.status.message(),
            num_victims: preemption.victim_pods().count(),
            nodes: by_node
                .into_iter()
                .map(|(node, victims)| NodeVictims { node, victims })
                .collect(),
            num_pdb_violations: preemption.num_pdb_violations,
            num_pod_group_disruptions: preemption.num_pod_group_disruptions,
            nominations: preemption
                .nominations
                .iter()
                .map(|(pod, node)| Nomination {
                    pod: pod.clone(),
                    node: node.clone(),
                })
                .collect(),
        }
    }

    /// The victims node by node in one line each: `n1: default/l1, default/l2`.
    pub fn victim_lines(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| {
                let pods: Vec<String> = n
                    .victims
                    .iter()
                    .map(|v| {
                        let mut text = format!("{}/{} (priority {}", v.namespace, v.name, v.priority);
                        if let Some(group) = &v.whole_group {
                            text.push_str(&format!(", with all of PodGroup {group}"));
                        }
                        if v.pdb_violation {
                            text.push_str(", violates a PodDisruptionBudget");
                        }
                        text.push(')');
                        text
                    })
                    .collect();
                format!("{}: {}", n.node, pods.join(", "))
            })
            .collect()
    }
}
