//! A Karpenter NodePool (`karpenter.sh/v1`) as the provisioner reads it: the template a new node is
//! made from (labels, requirements, taints, the node class), its weight, and its limits with what
//! its nodes already use.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use super::requirements::{
    NODE_INITIALIZED_LABEL, NODE_POOL_LABEL, NODE_REGISTERED_LABEL, Requirement, RequirementError,
    Requirements,
};
use super::resources::ResourceAmounts;

/// The resource name a pool's node count limit goes by.
pub const NODES_RESOURCE: &str = "nodes";

/// What a NodePool cannot be read as.
#[derive(Debug, thiserror::Error)]
pub enum NodePoolError {
    /// Not a NodePool of `karpenter.sh/v1`.
    #[error("NodePool: {0}")]
    Json(#[from] serde_json::Error),
    /// A requirement of its template cannot be built.
    #[error("NodePool {name}: {source}")]
    Requirement {
        /// The pool.
        name: String,
        /// Why.
        source: RequirementError,
    },
}

/// A NodePool.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePool {
    /// Its name.
    pub name: String,
    /// `spec.weight`: pools are tried heaviest first.
    pub weight: i32,
    /// The labels of the nodes it makes (`spec.template.metadata.labels` and the pool's and node
    /// class's labels Karpenter adds).
    pub labels: BTreeMap<String, String>,
    /// The template's requirements, its labels and the simulation's registered/initialized keys
    /// (`NewNodeClaimTemplate`).
    pub requirements: Requirements,
    /// `spec.template.spec.taints`: pods must tolerate them.
    pub taints: Vec<Taint>,
    /// `spec.template.spec.startupTaints`: removed once the node is ready, so pods need not tolerate
    /// them.
    pub startup_taints: Vec<Taint>,
    /// `spec.limits`, when set.
    pub limits: Option<ResourceAmounts>,
}

#[derive(Deserialize)]
struct RawNodePool {
    metadata: RawMetadata,
    #[serde(default)]
    spec: RawSpec,
}

#[derive(Deserialize, Default)]
struct RawMetadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
struct RawSpec {
    #[serde(default)]
    weight: Option<i32>,
    #[serde(default)]
    template: RawTemplate,
    #[serde(default)]
    limits: Option<BTreeMap<String, Quantity>>,
}

#[derive(Deserialize, Default)]
struct RawTemplate {
    #[serde(default)]
    metadata: RawMetadata,
    #[serde(default)]
    spec: RawTemplateSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawTemplateSpec {
    #[serde(default)]
    requirements: Vec<RawRequirement>,
    #[serde(default)]
    taints: Vec<Taint>,
    #[serde(default)]
    startup_taints: Vec<Taint>,
    #[serde(default)]
    node_class_ref: Option<RawNodeClassRef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRequirement {
    #[serde(flatten)]
    requirement: NodeSelectorRequirement,
    #[serde(default)]
    min_values: Option<i64>,
}

#[derive(Deserialize)]
struct RawNodeClassRef {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
}

impl NodePool {
    /// Reads a NodePool object (JSON).
    pub fn from_json(value: serde_json::Value) -> Result<Self, NodePoolError> {
        let raw: RawNodePool = serde_json::from_value(value)?;
        let name = raw.metadata.name;
        let template = raw.spec.template;
        let mut labels = template.metadata.labels;
        labels.insert(NODE_POOL_LABEL.to_owned(), name.clone());
        if let Some(class) = &template.spec.node_class_ref {
            // `NodeClassLabelKey`: group/lowercased kind.
            labels.insert(
                format!("{}/{}", class.group, class.kind.to_lowercase()),
                class.name.clone(),
            );
        }
        let wrap = |source| NodePoolError::Requirement {
            name: name.clone(),
            source,
        };
        let mut requirements = Requirements::new();
        for raw_requirement in &template.spec.requirements {
            let r = &raw_requirement.requirement;
            requirements.add(
                Requirement::new(
                    &r.key,
                    &r.operator,
                    r.values.as_deref().unwrap_or_default(),
                    raw_requirement.min_values,
                )
                .map_err(wrap)?,
            );
        }
        requirements.add_all(&Requirements::from_labels(&labels));
        requirements.add(Requirement::equal(NODE_REGISTERED_LABEL, "true"));
        requirements.add(Requirement::equal(NODE_INITIALIZED_LABEL, "true"));
        Ok(NodePool {
            name,
            weight: raw.spec.weight.unwrap_or(0),
            labels,
            requirements,
            taints: template.spec.taints,
            startup_taints: template.spec.startup_taints,
            limits: raw.spec.limits.as_ref().map(ResourceAmounts::from_list),
        })
    }

    /// What the limits leave for new nodes, given the capacities of the pool's existing nodes
    /// (each counting one `nodes`); `None` when the pool has no limits.
    pub fn remaining<'a>(
        &self,
        existing: impl IntoIterator<Item = &'a ResourceAmounts>,
    ) -> Option<ResourceAmounts> {
        let mut remaining = self.limits.clone()?;
        for capacity in existing {
            let mut used = capacity.clone();
            used.set(NODES_RESOURCE, 1);
            remaining = remaining.minus(&used);
        }
        Some(remaining)
    }
}

/// Pools in the order the provisioner tries them (`OrderByWeight`): heaviest first, and among
/// equal weights by name in reverse order.
pub fn by_weight(pools: &mut [NodePool]) {
    pools.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| b.name.cmp(&a.name)));
}
