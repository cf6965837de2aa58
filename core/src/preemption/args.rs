//! `DefaultPreemptionArgs` (kubescheduler.config.k8s.io/v1): how many candidate nodes preemption
//! dry-runs before it may stop. Read from the DefaultPreemption entry of a profile's pluginConfig.

use serde::{Deserialize, Serialize};

use crate::framework::runtime::{ResolvedProfile, decode_args};
use crate::plugins::names::DEFAULT_PREEMPTION;

/// `DefaultPreemptionArgs` (kubescheduler.config.k8s.io/v1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DefaultPreemptionArgs {
    /// Minimum share of the potential nodes, in percent, kube-scheduler dry-runs before it may stop.
    pub min_candidate_nodes_percentage: i32,
    /// Minimum number of candidates kube-scheduler looks for before it may stop.
    pub min_candidate_nodes_absolute: i32,
}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
        }
    }
}

impl DefaultPreemptionArgs {
    /// `ValidateDefaultPreemptionArgs`, with the field-error texts and aggregation of apimachinery.
    pub fn validate(&self) -> Result<(), String> {
        let pct = self.min_candidate_nodes_percentage;
        let abs = self.min_candidate_nodes_absolute;
        let mut errs = Vec::new();
        if !(0..=100).contains(&pct) {
            errs.push(format!(
                "minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]"
            ));
        }
        if abs < 0 {
            errs.push(format!(
                "minCandidateNodesAbsolute: Invalid value: {abs}: not in valid range [0, inf)"
            ));
        }
        if pct == 0 && abs == 0 {
            errs.push(
                "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"
                    .to_string(),
            );
            errs.push(
                "minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"
                    .to_string(),
            );
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    /// `calculateNumCandidates`: max(nodes × percentage / 100, absolute), at most the number of nodes.
    pub fn calculate_num_candidates(&self, num_nodes: usize) -> usize {
        let n = num_nodes as i64;
        let by_share = n * i64::from(self.min_candidate_nodes_percentage) / 100;
        by_share
            .max(i64::from(self.min_candidate_nodes_absolute))
            .min(n)
            .max(0) as usize
    }

    /// The args of a profile (defaults when it sets none or they do not decode).
    pub fn from_profile(profile: &ResolvedProfile) -> Self {
        decode_args::<Self>(DEFAULT_PREEMPTION, profile.plugin_args.get(DEFAULT_PREEMPTION))
            .unwrap_or_default()
    }
}
