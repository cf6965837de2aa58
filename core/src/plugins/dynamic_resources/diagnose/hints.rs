//! The diagnosis in plain words: which selector matches nothing (and what values the devices do
//! have), which devices are held by which claims, which taints block them, the node that comes
//! closest and how far it is from enough.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceClass};

use super::{DeviceRef, Diagnosis, RequestDiagnosis, RequestFindings, RequestView, Verdict, Wants, verdict};
use crate::dra::cel;
use crate::snapshot::{NodeInfo, Snapshot};

/// How many values of an attribute a hint lists.
const MAX_VALUES: usize = 6;

/// `a, b, c and 4 more`.
fn name_list(names: &[&String], max: usize) -> String {
    let shown: Vec<&str> = names.iter().take(max).map(|s| s.as_str()).collect();
    match names.len().saturating_sub(max) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn wants_text(w: Wants) -> String {
    match w {
        Wants::Count(n) => plural(n.max(0) as usize, "device", "devices"),
        Wants::All => "all matching devices (allocationMode All)".to_string(),
    }
}

/// Hints for one request, appended to `hints`.
#[allow(clippy::too_many_arguments)]
pub(super) fn for_request(
    hints: &mut Vec<String>,
    claim: &str,
    d: &RequestDiagnosis,
    findings: &RequestFindings,
    node_devices: &[(&Arc<NodeInfo>, Vec<DeviceRef<'_>>)],
    cache: &cel::Cache,
    class: Option<&DeviceClass>,
    request: &RequestView<'_>,
) {
    let who = format!("claim {claim} request {}", d.request);
    for miss in d.selector_misses.iter().filter(|m| m.error.is_some()) {
        hints.push(format!(
            "{who}: selector #{} of {} `{}` fails on device {}: {} — kube-scheduler ends the scheduling \
             cycle with this error instead of trying other nodes",
            miss.index,
            miss.source,
            miss.expression,
            miss.sample_device,
            miss.error.as_deref().unwrap_or_default()
        ));
    }
    if !d.class_exists {
        hints.push(format!("{who}: device class {} does not exist", d.device_class));
        return;
    }
    let c = d.cluster;
    if c.devices == 0 {
        hints.push(format!(
            "{who}: no ResourceSlice publishes a device any node can reach (a DRA driver must publish \
             ResourceSlices before claims of class {} can be allocated)",
            d.device_class
        ));
        return;
    }
    if c.class_match == 0 {
        let by = d
            .selector_misses
            .iter()
            .find(|m| m.source.starts_with("class"))
            .map(|m| {
                format!(
                    ": its selector #{} `{}` rejects all {} devices",
                    m.index, m.expression, c.devices
                )
            })
            .unwrap_or_default();
        hints.push(format!(
            "{who}: none of the {} devices on any node matches device class {}{by}",
            c.devices, d.device_class
        ));
        return;
    }
    if c.request_match == 0 {
        let miss = d.selector_misses.iter().find(|m| m.source == "request");
        let (selector, values) = match miss {
            Some(m) => (
                format!("selector `{}`", m.expression),
                value_summary(&m.expression, node_devices, cache, class, request),
            ),
            None => ("the request's selectors".to_string(), String::new()),
        };
        hints.push(format!(
            "{who}: {selector} matches none of the {} devices of class {} on any node{values}",
            c.class_match, d.device_class
        ));
        return;
    }
    if c.free == 0 {
        let mut parts = Vec::new();
        if c.allocated > 0 {
            let holders: Vec<&String> = findings
                .holders
                .iter()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let names = name_list(&holders, 5);
            parts.push(format!("{} allocated to other claims ({names})", c.allocated));
        }
        if c.tainted > 0 {
            let taints: Vec<String> = findings.taints.keys().cloned().collect();
            parts.push(format!(
                "{} tainted {} without a matching toleration in the request",
                c.tainted,
                taints.join(", ")
            ));
        }
        if c.counters_used_up > 0 {
            parts.push(format!(
                "{} partitions whose shared counters the allocated partitions of their device have used up",
                c.counters_used_up
            ));
        }
        if c.incomplete_pool > 0 {
            parts.push(format!(
                "{} in pools whose ResourceSlices are not all published yet",
                c.incomplete_pool
            ));
        }
        hints.push(format!(
            "{who}: all {} matching devices are unavailable: {}",
            c.request_match,
            parts.join("; ")
        ));
        return;
    }
    if d.nodes_with_enough == 0 {
        let best = d
            .nodes
            .iter()
            .max_by(|a, b| a.counts.free.cmp(&b.counts.free).then(b.node.cmp(&a.node)));
        if let Some(best) = best {
            let matching = if request.selectors.is_empty() {
                format!("class {}", d.device_class)
            } else {
                format!("class {} and the request's selectors", d.device_class)
            };
            let b = best.counts;
            let mut unavailable = Vec::new();
            if b.allocated > 0 {
                let holders: Vec<&String> = findings.holders.iter().collect();
                unavailable.push(format!(
                    "{} more allocated to other claims ({})",
                    b.allocated,
                    name_list(&holders, 5)
                ));
            }
            if b.tainted > 0 {
                unavailable.push(format!("{} more tainted", b.tainted));
            }
            if b.counters_used_up > 0 {
                unavailable.push(format!("{} more short of shared counters", b.counters_used_up));
            }
            if b.incomplete_pool > 0 {
                unavailable.push(format!("{} more in incomplete pools", b.incomplete_pool));
            }
            let why = if unavailable.is_empty() {
                String::new()
            } else {
                format!(", and {}", unavailable.join(", "))
            };
            hints.push(format!(
                "{who}: asks for {}; the closest node, {}, has {} matching {matching}{why}",
                wants_text(d.wants),
                best.node,
                plural(best.counts.free, "free device", "free devices"),
            ));
        }
    }
}

/// Hints about the pod as a whole, after every request's.
pub(super) fn overall(diagnosis: &mut Diagnosis, snapshot: &Snapshot) {
    let pending: Vec<&RequestDiagnosis> = diagnosis.claims.iter().flat_map(|c| c.requests.iter()).collect();
    if pending.is_empty() || pending.iter().any(|r| r.nodes_with_enough == 0) {
        return;
    }
    // Nodes where every request alone has enough: if allocation fails there, the requests only fail
    // together.
    let together: Vec<String> = snapshot
        .nodes()
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            pending
                .iter()
                .all(|r| super::enough(&r.nodes[*i].counts, r.wants))
        })
        .map(|(_, n)| n.name().to_string())
        .collect();
    let constraints: Vec<&String> = diagnosis
        .claims
        .iter()
        .flat_map(|c| c.constraints.iter())
        .collect();
    let mut causes = Vec::new();
    if !constraints.is_empty() {
        causes.push(format!(
            "the constraints ({})",
            constraints
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if pending.len() > 1 {
        causes.push("requests competing for the same devices".to_string());
    }
    causes.push("shared counters of partitionable devices or consumed capacity".to_string());
    let nodes = name_list(&together.iter().collect::<Vec<_>>(), 5);
    if together.is_empty() {
        diagnosis.hints.push(format!(
            "every request has enough free devices on some node, but no node has enough for all of \
             them; the pod needs one node that can serve every claim ({})",
            causes.join(", ")
        ));
    } else {
        diagnosis.hints.push(format!(
            "on {nodes} every request has enough free devices on its own; where allocation still \
             fails there, the requests only fail together: {}",
            causes.join(", ")
        ));
    }
}

/// What values the devices kept by the class have for the capacities and attributes `expression`
/// reads (`device.capacity["domain"].name`, `device.attributes["domain"].name`): "; the largest
/// memory is 40Gi".
fn value_summary(
    expression: &str,
    node_devices: &[(&Arc<NodeInfo>, Vec<DeviceRef<'_>>)],
    cache: &cel::Cache,
    class: Option<&DeviceClass>,
    request: &RequestView<'_>,
) -> String {
    let mut parts = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let class_kept: Vec<DeviceRef<'_>> = node_devices
        .iter()
        .flat_map(|(_, ds)| ds.iter().copied())
        .filter(|d| seen.insert(d.id()))
        .filter(|d| {
            let v: Verdict = verdict(cache, class, request, *d);
            v.class_match
        })
        .collect();
    for (kind, domain, name) in references(expression) {
        let qualified = |d: &DeviceRef<'_>, key: &str| {
            // An unqualified name belongs to the device's driver's domain.
            if key == name && domain == d.slice.spec.driver {
                true
            } else {
                key == format!("{domain}/{name}")
            }
        };
        if kind == "capacity" {
            let mut values: Vec<(i64, String)> = class_kept
                .iter()
                .flat_map(|d| {
                    d.device
                        .capacity
                        .iter()
                        .flatten()
                        .filter(|(k, _)| qualified(d, k))
                        .map(|(_, c)| c.value.0.clone())
                        .collect::<Vec<_>>()
                })
                .filter_map(|q| crate::resource::parse_milli_value(&q).ok().map(|v| (v, q)))
                .collect();
            values.sort();
            match (values.first(), values.last()) {
                (Some(lo), Some(hi)) if lo.0 == hi.0 => {
                    parts.push(format!("every such device has {name} {}", hi.1));
                }
                (Some(lo), Some(hi)) => {
                    parts.push(format!("{name} ranges from {} to {} (the largest)", lo.1, hi.1))
                }
                _ => parts.push(format!("no such device has capacity {domain}/{name}")),
            }
        } else {
            let values: BTreeSet<String> = class_kept
                .iter()
                .flat_map(|d| {
                    d.device
                        .attributes
                        .iter()
                        .flatten()
                        .filter(|(k, _)| qualified(d, k))
                        .map(|(_, a)| attribute_text(a))
                        .collect::<Vec<_>>()
                })
                .collect();
            if values.is_empty() {
                parts.push(format!("no such device has attribute {domain}/{name}"));
            } else {
                let shown: Vec<&String> = values.iter().take(MAX_VALUES).collect();
                let more = values.len().saturating_sub(MAX_VALUES);
                let list = shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
                let tail = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                parts.push(format!("{name} is one of {list}{tail}"));
            }
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join("; "))
    }
}

fn attribute_text(a: &DeviceAttribute) -> String {
    if let Some(s) = &a.string {
        format!("{s:?}")
    } else if let Some(v) = &a.version {
        v.clone()
    } else if let Some(i) = a.int {
        i.to_string()
    } else if let Some(b) = a.bool {
        b.to_string()
    } else {
        "(list)".to_string()
    }
}

/// `(kind, domain, name)` of every `device.capacity["domain"].name` and
/// `device.attributes["domain"].name` in `expression`, in order, without repeats.
pub(super) fn references(expression: &str) -> Vec<(&'static str, String, String)> {
    let mut out: Vec<(&'static str, String, String)> = Vec::new();
    for (kind, prefix) in [
        ("capacity", "device.capacity[\""),
        ("attributes", "device.attributes[\""),
    ] {
        let mut rest = expression;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            let Some(end) = rest.find("\"]") else { break };
            let domain = rest[..end].to_string();
            let after = &rest[end + 2..];
            let Some(after) = after.strip_prefix('.') else {
                continue;
            };
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            if !name.is_empty()
                && !out
                    .iter()
                    .any(|(k, d, n)| *k == kind && *d == domain && *n == name)
            {
                out.push((kind, domain, name));
            }
        }
    }
    out
}
