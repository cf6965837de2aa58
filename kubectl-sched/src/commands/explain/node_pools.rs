//! `explain`'s "Would a new node help?" section: for a pod that fits no node, each Karpenter
//! NodePool of the cluster in the order the provisioner tries them, whether a new node of it would
//! take the pod, and if not why, in Karpenter's words; then what Karpenter itself would do (the
//! node it launches, or the `FailedScheduling` event it writes). The decision is sched-core's
//! ([`sched_core::node_pools`]); this module reads `--instance-types` and shapes the answer for the
//! table and `-o json`.

use std::path::{Path, PathBuf};

use sched_core::Snapshot;
use sched_core::node_pools::instance_types::{InstanceType, InstanceTypeError, parse_instance_types};
use sched_core::node_pools::new_node::FAILED_TO_SCHEDULE_PREFIX;
use sched_core::node_pools::{CatalogueSource, NewNode, PoolVerdict, node_pools_answer};
use serde::Serialize;

/// Why `--instance-types` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NodePoolsError {
    /// The file cannot be read.
    #[error("--instance-types {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a list of instance types.
    #[error("--instance-types {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why (the JSON error names the line and column).
        source: InstanceTypeError,
    },
}

/// Reads `--instance-types FILE`.
pub fn read_catalogue(path: &Path) -> Result<Vec<InstanceType>, NodePoolsError> {
    let text = std::fs::read_to_string(path).map_err(|source| NodePoolsError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_instance_types(&text).map_err(|source| NodePoolsError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// The node a pool would launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewNodeView {
    /// The pool.
    pub pool: String,
    /// The instance types still possible, cheapest first.
    pub instance_types: Vec<String>,
    /// The cheapest offering's price (0 when the types come from the cluster's nodes).
    pub price: f64,
}

impl From<&NewNode> for NewNodeView {
    fn from(n: &NewNode) -> Self {
        NewNodeView {
            pool: n.pool.clone(),
            instance_types: n.instance_types.clone(),
            price: n.price,
        }
    }
}

/// One pool's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolLine {
    /// The pool.
    pub pool: String,
    /// The node it would launch, when it would take the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_node: Option<NewNodeView>,
    /// Why not, in Karpenter's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodePoolsSection {
    /// Where the instance types came from: `file` or `nodes`.
    pub catalogue: CatalogueSource,
    /// How many instance types were tried.
    pub instance_types: usize,
    /// Each pool tried, in the provisioner's order.
    pub pools: Vec<PoolLine>,
    /// The node Karpenter would launch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<NewNodeView>,
    /// Otherwise the message of the `FailedScheduling` event Karpenter would write on the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub karpenter_event: Option<String>,
    /// NodePools that could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The section for `pod`, when the snapshot has NodePools.
pub fn section(
    snapshot: &Snapshot,
    pod: &k8s_openapi::api::core::v1::Pod,
    catalogue: Option<&[InstanceType]>,
) -> Option<NodePoolsSection> {
    let answer = node_pools_answer(snapshot, pod, catalogue)?;
    let pools = answer
        .answer
        .pools
        .iter()
        .map(|(pool, verdict)| match verdict {
            PoolVerdict::Fits(node) => PoolLine {
                pool: pool.clone(),
                new_node: Some(node.into()),
                reason: None,
            },
            PoolVerdict::Refused(reason) => PoolLine {
                pool: pool.clone(),
                new_node: None,
                reason: Some(reason.clone()),
            },
        })
        .collect();
    let (launch, karpenter_event) = match &answer.answer.outcome {
        Ok(node) => (Some(node.into()), None),
        Err(e) => (None, Some(format!("{FAILED_TO_SCHEDULE_PREFIX}{e}"))),
    };
    Some(NodePoolsSection {
        catalogue: answer.catalogue,
        instance_types: answer.instance_types,
        pools,
        launch,
        karpenter_event,
        warnings: answer.warnings,
    })
}
