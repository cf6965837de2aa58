//! A pod group's preemption in a simulation: when the group's cycle cannot place it and its
//! PodGroupPostFilter finds a placement (workload-aware preemption), the victims are reported as
//! preempted by the group and deleted after the cycle, as the executor's goroutine does
//! (`prepareCandidateAsync`), and each pod of the group is nominated to the node the preemption's
//! cycle placed it on (`applyPodGroupPostFilterResult`). The group's pods wait, gated
//! (DefaultPreemption's PreEnqueue while the preemption runs), until the victims are gone; the
//! deletions requeue them and a later cycle places the group.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::hints::HintInputs;
use super::simulation::{Landing, PodOutcome, Simulation, Victim, with_nomination};
use crate::preemption::pod_group::{GroupPreemption, GroupPreemptionOutcome};
use crate::snapshot::PodInfo;

/// A parked pod of the group, with what requeues it.
type ParkedMember = (Arc<PodInfo>, BTreeSet<&'static str>, HintInputs);

impl Simulation<'_> {
    /// Carries out `preemption` (when it found a placement) for the group `group` (`namespace/name`)
    /// whose pods are `parked`: their nominations, the victims reported and their deletion queued.
    /// Returns the pods (`namespace/name`) that wait for it.
    pub(super) fn start_group_preemption(
        &mut self,
        group: &str,
        preemption: Option<&GroupPreemption>,
        parked: &mut [ParkedMember],
    ) -> Vec<String> {
        let Some(preemption) = preemption.filter(|p| p.outcome == GroupPreemptionOutcome::Found) else {
            return Vec::new();
        };
        for (pod, _, _) in parked.iter_mut() {
            let Some((_, node)) = preemption.nominations.iter().find(|(name, _)| name == pod.name()) else {
                continue;
            };
            let nominated = Arc::new(with_nomination(pod, node));
            Arc::make_mut(&mut self.snapshot).add_pending_pod(nominated.clone());
            *pod = nominated;
        }
        let victims: Vec<Arc<PodInfo>> = preemption.victim_pods().cloned().collect();
        for victim in &victims {
            let key = victim.key();
            if self.victims.iter().any(|v| v.pod == key) {
                continue;
            }
            self.victims.push(Victim {
                pod: key.clone(),
                node: victim.node_name().to_string(),
                priority: victim.priority,
                preemptor: group.to_string(),
            });
            if let Some(result) = self.results.get_mut(&key) {
                result.outcome = PodOutcome::Preempted;
                result.preempted_by = Some(group.to_string());
            }
        }
        let members: Vec<String> = parked.iter().map(|(pod, _, _)| pod.key()).collect();
        // Without victims no goroutine starts and nothing is gated.
        if victims.is_empty() {
            return Vec::new();
        }
        self.in_transit.push(Landing::GroupPreemption {
            members: members.clone(),
            victims,
        });
        members
    }

    /// The group preemption's goroutine: the victims deleted (each an AssignedPod/Delete); the
    /// group's pods ungated.
    pub(super) fn land_group_preemption(&mut self, members: &[String], victims: &[Arc<PodInfo>]) {
        for key in members {
            self.queue.set_gated(key, false);
        }
        self.delete_victims(victims);
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::features::FeatureGates;
    use crate::simulate::group_cycle::GroupOutcome;
    use crate::simulate::simulation::{PodOutcome, Simulation, SimulationOptions};
    use crate::snapshot::ClusterObjects;
    use crate::testing::{gang, node, pod};

    /// A gang that fits only once lower-priority pods go: its first cycle preempts them (the one
    /// the placement leaves room for is spared), and the next places the whole group on the nodes
    /// it was nominated to. Without the group's preemption the gang stayed pending.
    #[test]
    fn a_gang_preempts_then_is_placed_on_the_next_cycle() {
        let low = |name: &str, n: &str, cpu: &str| pod(name).priority(0).cpu(cpu).node(n).obj();
        let objects = ClusterObjects {
            nodes: vec![
                node("n1").cpu("4").memory("8Gi").obj(),
                node("n2").cpu("4").memory("8Gi").obj(),
            ],
            pods: vec![
                low("l1", "n1", "2"),
                low("spared", "n1", "1"),
                low("l2", "n2", "2"),
                pod("a").pod_group("pg").priority(100).cpu("3").obj(),
                pod("b").pod_group("pg").priority(100).cpu("3").obj(),
            ],
            pod_groups: vec![gang("pg", 2).priority(100).obj()],
            ..Default::default()
        };
        let gates = FeatureGates::v1_37()
            .with_overrides("GenericWorkload=true")
            .expect("gate");
        let engine = Engine::for_features(None, gates).expect("engine");
        let mut simulation = Simulation::new(&engine, engine.snapshot(objects), SimulationOptions::default());
        let report = simulation.run(&mut |_| {}).expect("runs");
        let mut victims: Vec<(&str, &str, &str)> = report
            .victims
            .iter()
            .map(|v| (v.pod.as_str(), v.node.as_str(), v.preemptor.as_str()))
            .collect();
        victims.sort_unstable();
        assert_eq!(
            victims,
            [
                ("default/l1", "n1", "default/pg"),
                ("default/l2", "n2", "default/pg")
            ]
        );
        let group = &report.groups[0];
        assert_eq!(
            (group.outcome, group.placed, group.total),
            (GroupOutcome::Scheduled, 2, 2)
        );
        let mut nodes: Vec<&str> = report
            .pods
            .iter()
            .filter(|p| p.outcome == PodOutcome::Scheduled)
            .filter_map(|p| p.node.as_deref())
            .collect();
        nodes.sort_unstable();
        assert_eq!(nodes, ["n1", "n2"]);
    }
}
