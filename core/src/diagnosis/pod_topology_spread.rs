//! PodTopologySpread explained, per `DoNotSchedule` constraint, from the counts its PreFilter made:
//! matching pods per domain, the global minimum (0 while fewer domains exist than minDomains), the
//! skew the node's domain would get, and the domains that would keep it within maxSkew.

use super::change::Change;
use super::finding::{Context, Detail, DomainCount, Explained, ReasonCode};
use crate::NodeInfo;
use crate::plugins::pod_topology_spread::{SpreadCounts, pre_filter_counts};

/// Domains named in one message at most; `-o json` has them all.
const MAX_DOMAINS_NAMED: usize = 6;

fn list(items: &[String]) -> String {
    if items.len() <= MAX_DOMAINS_NAMED {
        items.join(", ")
    } else {
        format!(
            "{} and {} more",
            items[..MAX_DOMAINS_NAMED].join(", "),
            items.len() - MAX_DOMAINS_NAMED
        )
    }
}

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let Some(counts) = pre_filter_counts(ctx.state) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (
        i,
        SpreadCounts {
            constraint: c,
            domains,
            global_min,
        },
    ) in counts.iter().enumerate()
    {
        let key = &c.topology_key;
        let mut sorted: Vec<DomainCount> = domains
            .iter()
            .map(|(d, n)| DomainCount {
                domain: d.clone(),
                pods: *n,
            })
            .collect();
        sorted.sort_by(|a, b| a.domain.cmp(&b.domain));
        let self_match = i64::from(c.selector.matches_opt(ctx.pod.labels()));
        let allowed: Vec<String> = sorted
            .iter()
            .filter(|d| d.pods + self_match - global_min <= i64::from(c.max_skew))
            .map(|d| d.domain.clone())
            .collect();
        let counts_text = sorted
            .iter()
            .map(|d| format!("{}={}", d.domain, d.pods))
            .collect::<Vec<_>>()
            .join(", ");
        let Some(value) = node.labels().get(key) else {
            out.push(Explained {
                reason: ReasonCode::TopologySpreadMissingTopologyKey,
                message: format!("topology spread constraint {i}: the node has no {key} label"),
                detail: detail(i, c, sorted, *global_min, None, 0, allowed),
                changes: Vec::new(),
            });
            continue;
        };
        let here = domains.get(value).copied().unwrap_or(0);
        let skew = here + self_match - global_min;
        if skew <= i64::from(c.max_skew) {
            continue;
        }
        let too_few_domains = (domains.len() as i64) < i64::from(c.min_domains);
        let (reason, message, changes) = if too_few_domains {
            let exist = domains.len();
            (
                ReasonCode::TopologySpreadMinDomains,
                format!(
                    "topology spread constraint {i} ({key}): minDomains {} but only {exist} domain(s) exist \
                     ({counts_text}), so the global minimum counts as 0 and {key}={value} would have skew \
                     {skew} > maxSkew {}",
                    c.min_domains, c.max_skew
                ),
                vec![
                    Change::SetMinDomains {
                        constraint: i,
                        min_domains: (exist > 1).then_some(exist as i32),
                    },
                    Change::ScheduleAnyway { constraint: i },
                ],
            )
        } else {
            (
                ReasonCode::TopologySpreadMaxSkew,
                format!(
                    "topology spread constraint {i} ({key}, maxSkew {}): {key}={value} would have skew {skew} \
                     (pods per domain: {counts_text}; minimum {global_min}); {}",
                    c.max_skew,
                    if allowed.is_empty() {
                        "no domain is within maxSkew".to_string()
                    } else {
                        format!("allowed: {}", list(&allowed))
                    }
                ),
                vec![Change::ScheduleAnyway { constraint: i }],
            )
        };
        out.push(Explained {
            reason,
            message,
            detail: detail(i, c, sorted, *global_min, Some(value.clone()), skew, allowed),
            changes,
        });
    }
    out
}

fn detail(
    i: usize,
    c: &crate::plugins::pod_topology_spread::SpreadConstraint,
    domains: Vec<DomainCount>,
    global_min: i64,
    node_domain: Option<String>,
    skew: i64,
    allowed_domains: Vec<String>,
) -> Detail {
    Detail::TopologySpread {
        constraint: i,
        topology_key: c.topology_key.clone(),
        max_skew: c.max_skew,
        min_domains: c.min_domains,
        domains,
        global_min,
        node_domain,
        skew,
        allowed_domains,
    }
}
