//! `--via`: whether `explain` asks the cluster's explainer or lists the cluster. The explainer
//! answers one pod, named, with `-o`, `--node`, `--profile` and `--exit-code`; anything else (files,
//! what-if flags, `--watch`, groups, `--all-pending`, another release or configuration) is
//! evaluated here from a listing.

use crate::cli::{ExplainArgs, GlobalArgs, Via};
use crate::source::explainer::{Availability, ExplainRequest, PodExplanation, is_unanswered, output_flag};
use crate::source::load::{Cluster, LoadError};

use super::{ExplainError, pod_group};

/// `explain` answered by the cluster's explainer.
#[derive(Debug)]
pub struct ServedOutput {
    /// The answer, as the explainer rendered it.
    pub explanation: PodExplanation,
    /// Always shown.
    pub warnings: Vec<String>,
    /// Shown with `-v 1`.
    pub notes: Vec<String>,
}

/// Where `explain`'s answer came from.
#[derive(Debug)]
pub enum Route {
    /// The cluster's explainer answered.
    Served(Box<ServedOutput>),
    /// List and evaluate here; the notes say why (`-v 1`).
    Local(Vec<String>),
}

/// Why the explainer cannot answer these arguments: the first flag it does not take.
fn unserved_flag(args: &ExplainArgs, global: &GlobalArgs) -> Option<&'static str> {
    let what_if = &args.what_if;
    let flags = [
        ("--from", args.from.is_some()),
        ("-f", args.filename.is_some()),
        ("--all-pending", args.all_pending),
        ("--watch", args.watch),
        ("--config", args.config.is_some()),
        ("--kube-version", args.release.kube_version.is_some()),
        ("--feature-gates", args.release.feature_gates.is_some()),
        ("--instance-types", args.node_pools.instance_types.is_some()),
        (
            "a what-if flag",
            !(what_if.set.is_empty()
                && what_if.without_pod.is_empty()
                && what_if.uncordon.is_empty()
                && what_if.add_node.is_empty()),
        ),
        ("-A", global.all_namespaces),
        ("-o jsonpath-file", output_flag(&args.output).is_none()),
        (
            "podgroup/NAME or workload/NAME",
            args.pod.as_deref().and_then(pod_group::group_target).is_some(),
        ),
    ];
    flags.into_iter().find(|(_, given)| *given).map(|(flag, _)| flag)
}

/// Asks the cluster's explainer when `--via` and the arguments allow it.
pub fn route(global: &GlobalArgs, args: &ExplainArgs) -> Result<Route, ExplainError> {
    if args.via == Via::Local {
        return Ok(Route::Local(vec![
            "explain: listing the cluster (--via local)".to_string(),
        ]));
    }
    if let Some(flag) = unserved_flag(args, global) {
        return match args.via {
            Via::Cluster => Err(ExplainError::NotServed { flag }),
            _ => Ok(Route::Local(vec![format!(
                "explain: listing the cluster (the cluster's explainer does not take {flag})"
            )])),
        };
    }
    let Some(pod) = args.pod.clone() else {
        return Ok(Route::Local(Vec::new()));
    };
    let cluster = Cluster::connect(global)?;
    let availability = cluster
        .explainer_availability()
        .map_err(|e| ExplainError::Load(Box::new(e)))?;
    let mut notes = Vec::new();
    match (&availability, args.via) {
        (Availability::Unavailable(why), Via::Auto) => {
            return Ok(Route::Local(vec![format!(
                "explain: listing the cluster ({why})"
            )]));
        }
        (Availability::Unavailable(why), _) => {
            return Err(ExplainError::Load(Box::new(LoadError::Unavailable {
                server: cluster.server.clone(),
                why: why.clone(),
            })));
        }
        (Availability::Unknown(why), _) => notes.push(format!("explain: {why}; asking the explainer anyway")),
        (Availability::Available, _) => {}
    }
    let request = ExplainRequest {
        namespace: global
            .namespace
            .clone()
            .unwrap_or_else(|| cluster.default_namespace.clone()),
        pod: crate::source::pods::pod_name(&pod).to_string(),
        output: output_flag(&args.output),
        node: args.node.clone(),
        profile: args.profile.clone(),
        exit_code: args.exit_code,
    };
    match cluster.served_explain(&request) {
        Ok(explanation) => {
            let snapshot = &explanation.snapshot;
            notes.push(format!(
                "explain: answered by the cluster's explainer ({}) from its snapshot at resourceVersion {}{}{}",
                crate::source::explainer::API_SERVICE,
                snapshot.resource_version,
                snapshot
                    .seconds_since_last_event
                    .map(|s| format!(", last event {s:.1} s ago"))
                    .unwrap_or_default(),
                if snapshot.in_sync { "" } else { ", not in sync" },
            ));
            notes.extend(explanation.answer.notes.iter().cloned());
            Ok(Route::Served(Box::new(ServedOutput {
                warnings: explanation.answer.warnings.clone(),
                explanation,
                notes,
            })))
        }
        // Under auto, an explainer not known to be there (the APIService could not be read) may
        // not be: any refusal then means "list", as does an explainer that did not answer.
        Err(e) if args.via == Via::Auto && (is_unanswered(&e) || availability != Availability::Available) => {
            Ok(Route::Local(vec![format!(
                "explain: listing the cluster (the cluster's explainer did not answer: {})",
                sched_core::api_error::describe(&e)
            )]))
        }
        Err(e) => Err(ExplainError::Load(Box::new(cluster.served_error(&request, e)))),
    }
}
