//! Hints beyond what kube-scheduler says: the changes that make the pod schedulable (sched-core's
//! diagnosis checks each by applying it to a copy of the cluster and running the scheduling cycle
//! again, so none is printed that would not change the verdict), why PreFilter rejected it, and when
//! the answer depends on node sampling, a random tie or the nominated node's fast path.

use k8s_openapi::api::core::v1::Taint;
pub use sched_core::diagnosis::taint_text;
use sched_core::diagnosis::{Change, ReasonCode, Report, Shortfall, VerifiedHint};
use sched_core::explain::Explanation;
use sched_core::features::FeatureGates;
use sched_core::{NodeInfo, PodInfo};
use serde::Serialize;

/// At most this many checked changes become hints (the smallest first).
pub const MAX_CHANGE_HINTS: usize = 5;
/// Node lists in messages name at most this many nodes, then count the rest.
pub const MAX_NAMES: usize = 5;

/// `a, b, c`, or `a, b, c, d, e and 7 more` past `max` names.
pub fn name_list(names: &[String], max: usize) -> String {
    if names.len() <= max {
        return names.join(", ");
    }
    format!("{} and {} more", names[..max].join(", "), names.len() - max)
}

/// What a hint is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HintKind {
    /// A change to the pod or the cluster after which the pod is schedulable (checked).
    Change,
    /// A PreFilter plugin rejected the pod before any node was looked at.
    PreFilter,
    /// kube-scheduler would stop filtering early (percentageOfNodesToScore).
    Sampling,
    /// Several nodes share the top score.
    Tie,
    /// The pod's nominated node is tried first.
    NominatedNode,
    /// The pod is being deleted.
    Terminating,
    /// Why the pod's ResourceClaims cannot get devices (DynamicResources).
    ResourceClaims,
}

/// One hint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hint {
    /// What it is about.
    pub kind: HintKind,
    /// The nodes it concerns (empty when it is about the pod).
    pub nodes: Vec<String>,
    /// The hint.
    pub message: String,
    /// YAML to add to the pod (a toleration) or to apply (a PersistentVolume), when there is some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// For a change: the change as data (docs/reasons.md lists the kinds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
    /// For a change: the code of the finding it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<ReasonCode>,
}

/// What the hints are computed from.
pub struct HintInput<'a> {
    /// The evaluation (for a gated pod, the one without its gates).
    pub explanation: &'a Explanation,
    /// The pod.
    pub pod: &'a PodInfo,
    /// The findings and the checked changes.
    pub report: &'a Report,
}

/// How far a node is from fitting: the share of each request that is missing, summed.
pub fn missing_share(short: &[Shortfall]) -> f64 {
    short
        .iter()
        .map(|s| s.missing() as f64 / (s.requested.max(1) as f64))
        .sum()
}

/// All hints, most specific first.
pub fn hints(input: &HintInput<'_>) -> Vec<Hint> {
    let mut out = Vec::new();
    let e = input.explanation;
    if input.pod.is_terminating() {
        out.push(Hint {
            kind: HintKind::Terminating,
            nodes: Vec::new(),
            message: "the pod is being deleted (metadata.deletionTimestamp is set): kube-scheduler skips it"
                .to_string(),
            snippet: None,
            change: None,
            reason: None,
        });
    }
    if let Some(msg) = &e.pre_filter_message {
        let plugin = e
            .nodes
            .first()
            .and_then(|n| n.plugin.as_deref())
            .unwrap_or("a PreFilter plugin");
        out.push(Hint {
            kind: HintKind::PreFilter,
            nodes: Vec::new(),
            message: format!("{plugin} rejected the pod before any node was evaluated: {msg}"),
            snippet: None,
            change: None,
            reason: None,
        });
        // Without a successful PreFilter there is no cycle state to run filters on.
        return finish(out, e);
    }
    out.extend(input.report.hints.iter().take(MAX_CHANGE_HINTS).map(change_hint));
    finish(out, e)
}

fn finish(mut out: Vec<Hint>, e: &Explanation) -> Vec<Hint> {
    if let Some(node) = &e.nominated_node_fast_path {
        out.push(Hint {
            kind: HintKind::NominatedNode,
            nodes: vec![node.clone()],
            message: format!(
                "the pod's status.nominatedNodeName is {node} and it fits there: kube-scheduler tries \
                 that node first and takes it without scoring the others"
            ),
            snippet: None,
            change: None,
            reason: None,
        });
    }
    // A tie needs two nodes at the top; a pod held before the queue has no selected node.
    if e.tie && e.selected.len() > 1 {
        out.push(Hint {
            kind: HintKind::Tie,
            nodes: e.selected.clone(),
            message: format!(
                "{} nodes share the top score{}: kube-scheduler picks one of them at random",
                e.selected.len(),
                e.selected_score.map(|s| format!(" {s}")).unwrap_or_default()
            ),
            snippet: None,
            change: None,
            reason: None,
        });
    }
    if e.sampling.answer_depends_on_sampling {
        let s = &e.sampling;
        out.push(Hint {
            kind: HintKind::Sampling,
            nodes: Vec::new(),
            message: format!(
                "{} of {} nodes are feasible, but kube-scheduler stops filtering once it has found {} \
                 (percentageOfNodesToScore {}): it scores only those, starting where its previous cycle \
                 stopped, so it may pick a lower-scoring node than the selected one",
                e.feasible.len(),
                s.nodes_considered,
                s.nodes_to_find,
                if s.percentage_of_nodes_to_score == 0 {
                    "adaptive".to_string()
                } else {
                    format!("{}%", s.percentage_of_nodes_to_score)
                }
            ),
            snippet: None,
            change: None,
            reason: None,
        });
    }
    out
}

/// One checked change as a hint: the change, and where kube-scheduler would then put the pod.
fn change_hint(h: &VerifiedHint) -> Hint {
    let snippet = match &h.change {
        Change::AddToleration { taints } if !taints.is_empty() => Some(toleration_snippet(taints)),
        Change::CreatePersistentVolume { volume, .. } => volume_snippet(volume),
        _ => None,
    };
    Hint {
        kind: HintKind::Change,
        nodes: h.schedules_on.clone(),
        message: format!(
            "{}: the pod then schedules on {}",
            h.description,
            name_list(&h.schedules_on, MAX_NAMES)
        ),
        snippet,
        change: Some(h.change.clone()),
        reason: Some(h.reason),
    }
}

/// The node's NoSchedule/NoExecute taints that `tolerations` do not tolerate (TaintToleration's
/// rejection reasons), with the `Lt`/`Gt` operators as `features` say.
pub fn untolerated_taints(
    node: &NodeInfo,
    tolerations: &[k8s_openapi::api::core::v1::Toleration],
    features: &FeatureGates,
) -> Vec<Taint> {
    sched_core::diagnosis::untolerated_taints(
        node,
        tolerations,
        features.taint_toleration_comparison_operators,
    )
}

/// The PersistentVolume as YAML for `kubectl apply -f`, its placeholder path marked by a comment.
pub fn volume_snippet(volume: &k8s_openapi::api::core::v1::PersistentVolume) -> Option<String> {
    let yaml = yaml_serde::to_string(volume).ok()?;
    let placeholder = sched_core::diagnosis::LOCAL_PATH_PLACEHOLDER;
    Some(yaml.replacen(
        placeholder,
        &format!("{placeholder}  # replace: a directory (or mounted disk) of the node"),
        1,
    ))
}

/// The `tolerations:` YAML that tolerates exactly these taints.
pub fn toleration_snippet(taints: &[Taint]) -> String {
    let mut out = String::from("tolerations:\n");
    for t in taints {
        out.push_str(&format!("- key: {}\n", t.key));
        match t.value.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => {
                out.push_str("  operator: Equal\n");
                // JSON string syntax is valid YAML and keeps values like "true" strings.
                let quoted = serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}"));
                out.push_str(&format!("  value: {quoted}\n"));
            }
            None => out.push_str("  operator: Exists\n"),
        }
        out.push_str(&format!("  effect: {}\n", t.effect));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sched_core::diagnosis::{describe_shortfall, tolerations_tolerate_taint};

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.to_string(),
            value: value.map(str::to_string),
            effect: effect.to_string(),
            time_added: None,
        }
    }

    #[test]
    fn long_node_lists_are_cut() {
        let names: Vec<String> = (1..=8).map(|i| format!("n{i}")).collect();
        assert_eq!(name_list(&names[..2], 5), "n1, n2");
        assert_eq!(name_list(&names, 5), "n1, n2, n3, n4, n5 and 3 more");
    }

    #[test]
    fn shortfalls_read_like_quantities() {
        let cpu = Shortfall {
            resource: "cpu".into(),
            requested: 2000,
            free: 1700,
            allocatable: 4000,
        };
        assert_eq!(
            describe_shortfall(&cpu),
            "needs 300m more cpu (requests 2, 1700m free)"
        );
        let mem = Shortfall {
            resource: "memory".into(),
            requested: 4 << 30,
            free: -(1 << 20),
            allocatable: 8 << 30,
        };
        assert_eq!(
            describe_shortfall(&mem),
            "needs 4097Mi more memory (requests 4Gi, none free)"
        );
        let pods = Shortfall {
            resource: "pods".into(),
            requested: 1,
            free: 0,
            allocatable: 110,
        };
        assert_eq!(
            describe_shortfall(&pods),
            "has no room for another pod (Too many pods)"
        );
        let too_big = Shortfall {
            resource: "cpu".into(),
            requested: 3000,
            free: 1500,
            allocatable: 2000,
        };
        assert_eq!(
            describe_shortfall(&too_big),
            "can never fit: requests 3 cpu, 2 allocatable"
        );
    }

    #[test]
    fn a_volume_snippet_applies_as_the_volume_with_its_placeholder_marked() {
        use k8s_openapi::api::core::v1::{LocalVolumeSource, PersistentVolume, PersistentVolumeSpec};
        let volume = PersistentVolume {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("shop-data".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                storage_class_name: Some("local".into()),
                local: Some(LocalVolumeSource {
                    path: sched_core::diagnosis::LOCAL_PATH_PLACEHOLDER.into(),
                    fs_type: None,
                }),
                ..Default::default()
            }),
            status: None,
        };
        let snippet = volume_snippet(&volume).unwrap();
        assert!(
            snippet.starts_with("apiVersion: v1\nkind: PersistentVolume\n"),
            "{snippet}"
        );
        assert!(
            snippet.contains("  # replace: a directory (or mounted disk) of the node"),
            "{snippet}"
        );
        // The comment is YAML's, not part of the path: the snippet reads back as the volume.
        let read: PersistentVolume = yaml_serde::from_str(&snippet).unwrap();
        assert_eq!(read, volume);
    }

    #[test]
    fn snippets_tolerate_exactly_the_taints() {
        let taints = vec![
            taint("nvidia.com/gpu", Some("true"), "NoSchedule"),
            taint("node-role.kubernetes.io/control-plane", None, "NoSchedule"),
        ];
        let snippet = toleration_snippet(&taints);
        assert_eq!(
            snippet,
            "tolerations:\n- key: nvidia.com/gpu\n  operator: Equal\n  value: \"true\"\n  effect: NoSchedule\n\
             - key: node-role.kubernetes.io/control-plane\n  operator: Exists\n  effect: NoSchedule\n"
        );
        #[derive(serde::Deserialize)]
        struct Doc {
            tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
        }
        let doc: Doc = yaml_serde::from_str(&snippet).unwrap();
        for t in &taints {
            assert!(
                tolerations_tolerate_taint(&doc.tolerations, t, false),
                "{}",
                taint_text(t)
            );
        }
        assert_eq!(taint_text(&taints[0]), "nvidia.com/gpu=true:NoSchedule");
        assert_eq!(
            taint_text(&taints[1]),
            "node-role.kubernetes.io/control-plane:NoSchedule"
        );
    }
}
