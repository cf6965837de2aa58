//! Triage of many pending pods at once: pods are grouped by scheduling shape (one evaluation per
//! shape, see [`shape`]) and named by the workload they belong to ([`workload`]). The evaluation itself
//! is the engine's ([`crate::schedule::schedule_cycle`] with
//! [`crate::schedule::ScheduleOptions::stop_at_first_feasible`]): this module only decides what is
//! evaluated once and for whom, and what a group's root cause is ([`cause`]: what must change, not
//! the first filter kube-scheduler ran).

pub mod cause;
pub mod shape;
pub mod workload;

use std::collections::HashMap;
use std::sync::Arc;

use crate::snapshot::PodInfo;

pub use cause::{
    CauseBasis, NodeRejections, Rejection, RootCause, diagnostic_rejections, rejected_nodes, root_cause,
};
pub use shape::{ShapeKey, shape_key};
pub use workload::{Workload, WorkloadError, WorkloadIndex, parse_workload};

/// Pods kube-scheduler cannot tell apart: the first is evaluated, the answer holds for all.
#[derive(Debug, Clone)]
pub struct ShapeGroup {
    /// The pods, in the order they were given; never empty.
    pub pods: Vec<Arc<PodInfo>>,
}

impl ShapeGroup {
    /// The pod that is evaluated for the group.
    pub fn representative(&self) -> &Arc<PodInfo> {
        &self.pods[0]
    }
}

/// Groups `pods` by shape, groups in the order of their first pod.
pub fn group_by_shape(pods: &[Arc<PodInfo>]) -> Vec<ShapeGroup> {
    let mut index: HashMap<ShapeKey, usize> = HashMap::new();
    let mut groups: Vec<ShapeGroup> = Vec::new();
    for pod in pods {
        let key = shape_key(pod);
        match index.get(&key) {
            Some(&i) => groups[i].pods.push(pod.clone()),
            None => {
                index.insert(key, groups.len());
                groups.push(ShapeGroup {
                    pods: vec![pod.clone()],
                });
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::explain::Outcome;
    use crate::schedule::{ScheduleOptions, schedule};
    use crate::snapshot::{ClusterObjects, Snapshot};
    use crate::testing::{node, pod, toleration};

    /// A cluster where replicas of several templates are pending for different reasons.
    fn cluster() -> Snapshot {
        let mut pods = vec![
            pod("busy").cpu("3").node("small-1").obj(),
            pod("db-0").cpu("100m").label("app", "db").node("small-2").obj(),
        ];
        for i in 0..4 {
            pods.push(pod(&format!("web-{i}")).cpu("500m").label("app", "web").obj());
            pods.push(pod(&format!("big-{i}")).cpu("6").label("app", "big").obj());
            pods.push(
                pod(&format!("gpu-{i}"))
                    .cpu("100m")
                    .label("app", "gpu")
                    .node_selector("pool", "gpu")
                    .obj(),
            );
            pods.push(
                pod(&format!("tol-{i}"))
                    .cpu("100m")
                    .label("app", "tol")
                    .toleration(toleration("dedicated", "Equal", "gpu", "NoSchedule"))
                    .node_selector("pool", "gpu")
                    .obj(),
            );
        }
        pods.push(
            pod("web-nominated")
                .cpu("500m")
                .label("app", "web")
                .nominated("small-2")
                .obj(),
        );
        Snapshot::new(ClusterObjects {
            nodes: vec![
                node("small-1").cpu("4").obj(),
                node("small-2").cpu("4").obj(),
                node("gpu-1")
                    .cpu("8")
                    .label("pool", "gpu")
                    .taint("dedicated", "gpu", "NoSchedule")
                    .obj(),
            ],
            pods,
            ..Default::default()
        })
    }

    #[test]
    fn a_shape_gets_the_answer_each_of_its_pods_gets() {
        let snapshot = Arc::new(cluster());
        let engine = Engine::default();
        let fwk = engine
            .framework(engine.profile("").unwrap(), snapshot.clone())
            .unwrap();
        let groups = group_by_shape(&snapshot.pending_pods);
        // web ×4 (the nominated one is its own shape), big ×4, gpu ×4, tol ×4.
        let mut sizes: Vec<usize> = groups.iter().map(|g| g.pods.len()).collect();
        sizes.sort();
        assert_eq!(sizes, [1, 4, 4, 4, 4]);
        let options = ScheduleOptions {
            trace_filters: false,
            ..Default::default()
        };
        let quick = ScheduleOptions {
            stop_at_first_feasible: true,
            sample_from: None,
            ..options
        };
        let mut outcomes = Vec::new();
        for g in &groups {
            let shape = schedule(&fwk, g.representative(), quick);
            outcomes.push(shape.outcome);
            for p in &g.pods {
                let each = schedule(&fwk, p, options);
                assert_eq!(each.outcome, shape.outcome, "{}", p.key());
                assert_eq!(each.message, shape.message, "{}", p.key());
                if each.outcome == Outcome::Scheduled {
                    assert!(each.feasible.contains(&shape.selected[0]), "{}", p.key());
                }
            }
        }
        assert!(outcomes.contains(&Outcome::Scheduled));
        assert!(outcomes.contains(&Outcome::Unschedulable));
    }
}
