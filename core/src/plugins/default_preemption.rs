//! DefaultPreemption: the PostFilter that, when a pod fits nowhere, looks for a node where removing
//! lower-priority pods makes it fit, and nominates the pod there (see [`crate::preemption`]).
//!
//! Upstream the plugin also acts at PreEnqueue, keeping a preemptor out of the queue while its
//! asynchronous preemption is still deleting victims. That state lives in kube-scheduler's memory, which
//! this engine cannot see, so PreEnqueue here always lets the pod in.

use std::sync::Arc;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    FrameworkHandle, NodeToStatus, Plugin, PostFilterPlugin, PostFilterResult, PreEnqueuePlugin,
};
use crate::framework::runtime::{Handle, PluginError, decode_args};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::preemption::evaluator;
use crate::snapshot::PodInfo;

/// The plugin's registry name.
pub(crate) const NAME: &str = names::DEFAULT_PREEMPTION;

// The args and the message prefix belong to the preemption it runs; kept reachable from here too.
pub(crate) use crate::preemption::args::DefaultPreemptionArgs;
pub(crate) use crate::preemption::with_prefix;

/// The DefaultPreemption plugin.
#[derive(Debug, Default)]
pub(crate) struct DefaultPreemption {
    args: DefaultPreemptionArgs,
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }
}

impl PreEnqueuePlugin for DefaultPreemption {
    fn pre_enqueue(&self, _pod: &PodInfo) -> Status {
        Status::success()
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        fwk: &dyn FrameworkHandle,
        state: &CycleState,
        pod: &PodInfo,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        let now = evaluator::now_nanos();
        let eval = evaluator::evaluate(fwk, state, pod, statuses, &self.args, now);
        let (result, status) = eval.post_filter(eval.chosen());
        (result, with_prefix(status))
    }
}

/// Builds the plugin from its `DefaultPreemptionArgs`.
pub(crate) fn new(
    args: Option<&serde_json::Value>,
    _handle: &Handle,
    _features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    let args = decode_args::<DefaultPreemptionArgs>(NAME, args)?;
    args.validate().map_err(|message| PluginError::InvalidArgs {
        plugin: NAME.to_string(),
        message,
    })?;
    Ok(Arc::new(DefaultPreemption { args }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::interface::NominatingMode;
    use crate::framework::status::Code;
    use crate::preemption::tests_support::*;
    use crate::schedule::{ScheduleOptions, schedule_cycle};
    use crate::testing::{node, pod};

    #[test]
    fn args_defaults_and_validation() {
        let handle = Handle {
            snapshot: Arc::new(crate::testing::snapshot(vec![], vec![])),
        };
        type Case<'a> = (&'a str, serde_json::Value, Result<(i32, i32), &'a str>);
        let cases: Vec<Case<'_>> = vec![
            ("defaults", serde_json::json!({}), Ok((10, 100))),
            (
                "only percentage",
                serde_json::json!({"minCandidateNodesPercentage": 50}),
                Ok((50, 100)),
            ),
            (
                "zero percentage is fine with an absolute",
                serde_json::json!({"minCandidateNodesPercentage": 0}),
                Ok((0, 100)),
            ),
            (
                "percentage out of range",
                serde_json::json!({"minCandidateNodesPercentage": 101}),
                Err("minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]"),
            ),
            (
                "negative percentage",
                serde_json::json!({"minCandidateNodesPercentage": -1}),
                Err("minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]"),
            ),
            (
                "negative absolute",
                serde_json::json!({"minCandidateNodesAbsolute": -1}),
                Err("minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"),
            ),
            (
                "both zero",
                serde_json::json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}),
                Err(
                    "[minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute, minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage]",
                ),
            ),
            (
                "both out of range",
                serde_json::json!({"minCandidateNodesPercentage": 200, "minCandidateNodesAbsolute": -5}),
                Err(
                    "[minCandidateNodesPercentage: Invalid value: 200: not in valid range [0, 100], minCandidateNodesAbsolute: Invalid value: -5: not in valid range [0, inf)]",
                ),
            ),
        ];
        for (name, json, want) in cases {
            let args: DefaultPreemptionArgs = decode_args(NAME, Some(&json)).unwrap();
            match want {
                Ok((pct, abs)) => {
                    assert_eq!(args.validate(), Ok(()), "{name}");
                    assert_eq!(
                        (
                            args.min_candidate_nodes_percentage,
                            args.min_candidate_nodes_absolute
                        ),
                        (pct, abs),
                        "{name}"
                    );
                    assert!(
                        new(Some(&json), &handle, &crate::framework::FeatureGates::default()).is_ok(),
                        "{name}"
                    );
                }
                Err(msg) => {
                    assert_eq!(args.validate(), Err(msg.to_string()), "{name}");
                    let Err(PluginError::InvalidArgs { plugin, message }) =
                        new(Some(&json), &handle, &crate::framework::FeatureGates::default())
                    else {
                        panic!("{name}: expected an error")
                    };
                    assert_eq!((plugin.as_str(), message.as_str()), (NAME, msg), "{name}");
                }
            }
        }
    }

    #[test]
    fn num_candidates() {
        let args = |pct, abs| DefaultPreemptionArgs {
            min_candidate_nodes_percentage: pct,
            min_candidate_nodes_absolute: abs,
        };
        for (a, nodes, want) in [
            (args(10, 100), 50, 50),
            (args(10, 100), 500, 100),
            (args(10, 100), 5000, 500),
            (args(0, 2), 5, 2),
            (args(50, 1), 9, 4),
            (args(100, 0), 7, 7),
            (args(10, 100), 0, 0),
        ] {
            assert_eq!(a.calculate_num_candidates(nodes), want, "{a:?} nodes={nodes}");
        }
    }

    #[test]
    fn post_filter_success_nominates_the_node() {
        let snap = snapshot_with(
            vec![
                node("n1").cpu("2").memory("4Gi").obj(),
                node("n2").cpu("2").memory("4Gi").obj(),
            ],
            vec![
                pod("a").cpu("2").priority(10).node("n1").obj(),
                pod("b").cpu("2").priority(5).node("n2").obj(),
            ],
            vec![],
        );
        let fwk = framework(snap);
        let preemptor = pod("p").cpu("1").priority(100).info();
        let r = schedule_cycle(&fwk, &preemptor, ScheduleOptions::default());
        let (result, status) = fwk.run_post_filter_plugins(&r.state, &preemptor, &r.node_statuses);
        assert_eq!(status.code(), Code::Success);
        assert_eq!(
            status.message(),
            "preemption: found a potential placement for pod on node n2, preempting 1 victims"
        );
        assert_eq!(
            result,
            Some(PostFilterResult {
                nominated_node_name: "n2".into(),
                mode: NominatingMode::Override
            })
        );
        assert_eq!(
            r.explanation.message,
            "0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node n2, preempting 1 victims"
        );
    }

    #[test]
    fn post_filter_messages() {
        let nodes = || {
            vec![
                node("n1").cpu("2").memory("4Gi").obj(),
                node("n2").cpu("2").memory("4Gi").obj(),
                node("n3").cpu("2").memory("4Gi").unschedulable().obj(),
            ]
        };
        type Case<'a> = (
            &'a str,
            Vec<k8s_openapi::api::core::v1::Pod>,
            PodInfo,
            Code,
            Option<&'a str>,
            &'a str,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "no lower-priority pods anywhere",
                vec![
                    pod("a").cpu("2").priority(100).node("n1").obj(),
                    pod("b").cpu("2").priority(200).node("n2").obj(),
                ],
                pod("p").cpu("1").priority(100).info(),
                Code::Unschedulable,
                Some(""),
                "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
            ),
            (
                "victims do not free enough",
                vec![
                    pod("a").cpu("1").priority(1).node("n1").obj(),
                    pod("a2").cpu("1").priority(500).node("n1").obj(),
                    pod("b").cpu("2").priority(500).node("n2").obj(),
                ],
                pod("p").cpu("2").priority(100).info(),
                Code::Unschedulable,
                Some(""),
                "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
            ),
            (
                "preemptionPolicy Never",
                vec![
                    pod("a").cpu("2").priority(1).node("n1").obj(),
                    pod("b").cpu("2").priority(1).node("n2").obj(),
                ],
                pod("p").cpu("1").priority(100).preemption_policy("Never").info(),
                Code::Unschedulable,
                None,
                "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.",
            ),
            (
                "terminating victim on the nominated node",
                vec![
                    pod("a").cpu("2").priority(1).node("n1").preempted().obj(),
                    pod("b").cpu("2").priority(1).node("n2").obj(),
                ],
                pod("p").cpu("1").priority(100).nominated("n1").info(),
                Code::Unschedulable,
                None,
                "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: not eligible due to a terminating pod on the nominated node.",
            ),
        ];
        for (name, pods, preemptor, code, nominated, want) in cases {
            let fwk = framework(snapshot_with(nodes(), pods, vec![]));
            let r = schedule_cycle(&fwk, &preemptor, ScheduleOptions::default());
            let (result, status) = fwk.run_post_filter_plugins(&r.state, &preemptor, &r.node_statuses);
            assert_eq!(status.code(), code, "{name}");
            assert_eq!(
                result.map(|r| r.nominated_node_name),
                nominated.map(String::from),
                "{name}"
            );
            assert_eq!(r.explanation.message, want, "{name}");
        }
    }

    #[test]
    fn pre_enqueue_never_gates() {
        let p = DefaultPreemption::default();
        assert!(p.pre_enqueue(&pod("p").info()).is_success());
    }
}
