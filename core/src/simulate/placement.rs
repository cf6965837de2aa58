//! Topology placement in a simulation (TopologyAwareWorkloadScheduling): before a pod group's
//! cycle runs, the engine's cycle over placements ([`crate::schedule::placement`]) picks the
//! domain — the one the group fits best, or, when it fits none, the first one tried, whose pods
//! kube-scheduler reports — and the simulation's own cycle then runs with the snapshot limited to
//! that domain's nodes, so that a group that fits is bound in one domain only. The words of a
//! group that fits no domain are the placement cycle's ("0/N placements are available, …").

use std::sync::Arc;

use super::simulation::{Simulation, SimulationError};
use crate::schedule::ScheduleOptions;
use crate::schedule::placement::{PlacementCycle, run_placements, tries_placements};
use crate::snapshot::PodInfo;

/// Where the simulation runs a group's cycle.
pub(super) enum GroupPlacement {
    /// TopologyAwareWorkloadScheduling is off: the whole cluster, as before.
    Cluster,
    /// In this domain's nodes; the cycle over every placement, for the words.
    Domain(Vec<String>, Box<PlacementCycle>),
    /// No placement at all (no node has the key, or the group's bound pods span domains): every
    /// pod gets these words without being tried; `error` when it is the generator's error.
    Refused {
        /// The message on every pod of the group.
        message: String,
        /// The generator failed (Error), rather than found no placement (Unschedulable).
        error: bool,
    },
}

impl Simulation<'_> {
    /// Where the group `namespace/group` (its queued pods `queued`, `scheduled` bound) is tried.
    pub(super) fn group_placement(
        &self,
        first: &PodInfo,
        group: &str,
        min_count: i32,
        scheduled: usize,
        queued: &[Arc<PodInfo>],
    ) -> Result<GroupPlacement, SimulationError> {
        let fwk = self.engine.framework_for(&first.pod, self.snapshot.clone())?;
        if !tries_placements(&fwk) {
            return Ok(GroupPlacement::Cluster);
        }
        let options = ScheduleOptions {
            trace_filters: false,
            record_nodes: false,
            ..self.engine.schedule_options(false)
        };
        let cycle = run_placements(
            &fwk,
            first.namespace(),
            group,
            min_count,
            scheduled,
            queued,
            options,
        );
        if let Some(refused) = &cycle.refused {
            let words = cycle.words(&fwk, first, group, queued);
            return Ok(GroupPlacement::Refused {
                message: words.pod_not_reached,
                error: refused.code() == crate::framework::status::Code::Error,
            });
        }
        if let Some(error) = &cycle.error {
            return Ok(GroupPlacement::Refused {
                message: error.clone(),
                error: true,
            });
        }
        let nodes = cycle
            .chosen
            .map_or(cycle.tries.first(), |i| cycle.tries.get(i))
            .map(|t| t.placement.nodes.clone())
            .unwrap_or_default();
        Ok(GroupPlacement::Domain(nodes, Box::new(cycle)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::engine::Engine;
    use crate::features::FeatureGates;
    use crate::simulate::{GroupOutcome, PodOutcome, Simulation, SimulationOptions};
    use crate::snapshot::ClusterObjects;
    use crate::testing::{gang, node, pod};

    const ZONE: &str = "topology.kubernetes.io/zone";

    /// Zone-a: two 2-cpu nodes, zone-b: one 4-cpu node; PodGroup `pg` (minCount `min_count`, one
    /// zone) with `members` pending pods of 1 cpu; the simulation's nodes per pod and group outcome.
    fn simulate(
        tas: bool,
        min_count: i32,
        members: usize,
    ) -> (GroupOutcome, BTreeMap<String, String>, Option<String>) {
        let gates = if tas {
            "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
        } else {
            "GenericWorkload=true"
        };
        let engine = Engine::for_features(None, FeatureGates::v1_37().with_overrides(gates).expect("gates"))
            .expect("engine");
        let zoned = |name: &str, zone: &str, cpu: &str| {
            node(name)
                .cpu(cpu)
                .memory("8Gi")
                .pods("110")
                .label(ZONE, zone)
                .obj()
        };
        let objects = ClusterObjects {
            nodes: vec![
                zoned("a1", "zone-a", "2"),
                zoned("a2", "zone-a", "2"),
                zoned("b1", "zone-b", "4"),
            ],
            pods: (0..members)
                .map(|i| pod(&format!("w{i}")).pod_group("pg").cpu("1").obj())
                .collect(),
            pod_groups: vec![gang("pg", min_count).topology(ZONE).obj()],
            ..Default::default()
        };
        let mut simulation = Simulation::new(&engine, engine.snapshot(objects), SimulationOptions::default());
        let report = simulation.run(&mut |_| {}).expect("runs");
        let nodes = report
            .pods
            .iter()
            .filter(|p| p.outcome == PodOutcome::Scheduled)
            .map(|p| (p.pod.clone(), p.node.clone().unwrap_or_default()))
            .collect();
        let group = &report.groups[0];
        (group.outcome, nodes, group.message.clone())
    }

    /// (case, gate on, minCount, pods, outcome, zone of every placed pod, the group's words)
    #[test]
    fn simulate_places_a_group_in_one_zone() {
        let cases = [
            (
                "fits both zones: one of them, never split",
                true,
                4,
                4,
                GroupOutcome::Scheduled,
                Some("b"),
                None,
            ),
            (
                "fits the cluster, no single zone",
                true,
                5,
                5,
                GroupOutcome::Unschedulable,
                None,
                Some(
                    "pod group is unschedulable, 0/2 placements are available, first placement status: minCount \
                     (5) cannot be satisfied: 4 scheduled, 0 remaining, pod group preemption: No preemption \
                     victims found for incoming preemptor",
                ),
            ),
            (
                "gate off: the same group split over both zones",
                false,
                5,
                5,
                GroupOutcome::Scheduled,
                None,
                None,
            ),
        ];
        for (case, tas, min_count, members, outcome, zone, message) in cases {
            let (got, nodes, words) = simulate(tas, min_count, members);
            assert_eq!(got, outcome, "{case}: {words:?}");
            assert_eq!(words.as_deref(), message, "{case}");
            if let Some(zone) = zone {
                assert_eq!(nodes.len(), members, "{case}: every pod placed");
                assert!(
                    nodes.values().all(|n| n.starts_with(zone)),
                    "{case}: one zone: {nodes:?}"
                );
            }
            if !tas {
                let zones: std::collections::BTreeSet<char> =
                    nodes.values().filter_map(|n| n.chars().next()).collect();
                assert_eq!(zones.len(), 2, "{case}: split: {nodes:?}");
            }
        }
    }
}
