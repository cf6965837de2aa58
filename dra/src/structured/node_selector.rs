//! The allocation result's node selector (`createNodeSelector`): `metadata.name In [node]` as soon
//! as one device is local to the node (or binds to it); otherwise the union of the devices'
//! single-term node selectors; none when every device is reachable from every node.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};

/// Why a node selector could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeSelectorError {
    /// A slice (or device) selector with several terms; validation forbids it.
    #[error("unsupported ResourceSlice.NodeSelector with {0} terms")]
    UnsupportedTerms(usize),
}

/// The node selector for devices (each with its slice) allocated on `node_name`.
pub fn create_node_selector<'a>(
    devices: impl IntoIterator<Item = (&'a ResourceSlice, &'a Device)>,
    node_name: &str,
) -> Result<Option<NodeSelector>, NodeSelectorError> {
    let mut fields: Vec<NodeSelectorRequirement> = Vec::new();
    let mut expressions: Vec<NodeSelectorRequirement> = Vec::new();
    for (slice, device) in devices {
        let (name, selector) = if slice.spec.per_device_node_selection == Some(true) {
            (device.node_name.as_ref(), device.node_selector.as_ref())
        } else {
            (slice.spec.node_name.as_ref(), slice.spec.node_selector.as_ref())
        };
        if name.is_some() || device.binds_to_node == Some(true) {
            return Ok(Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node_name.to_string()]),
                    }]),
                    match_expressions: None,
                }],
            }));
        }
        let Some(selector) = selector else {
            continue;
        };
        match selector.node_selector_terms.as_slice() {
            [] => {}
            [term] => {
                add_new_requirements(term.match_fields.as_deref(), &mut fields);
                add_new_requirements(term.match_expressions.as_deref(), &mut expressions);
            }
            terms => return Err(NodeSelectorError::UnsupportedTerms(terms.len())),
        }
    }
    if fields.is_empty() && expressions.is_empty() {
        return Ok(None);
    }
    Ok(Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: (!fields.is_empty()).then_some(fields),
            match_expressions: (!expressions.is_empty()).then_some(expressions),
        }],
    }))
}

/// `addNewNodeSelectorRequirements`: appends requirements not present yet (same key, operator
/// and set of values).
fn add_new_requirements(from: Option<&[NodeSelectorRequirement]>, to: &mut Vec<NodeSelectorRequirement>) {
    let values =
        |r: &NodeSelectorRequirement| -> BTreeSet<String> { r.values.iter().flatten().cloned().collect() };
    for requirement in from.into_iter().flatten() {
        let present = to.iter().any(|e| {
            e.key == requirement.key && e.operator == requirement.operator && values(e) == values(requirement)
        });
        if !present {
            to.push(requirement.clone());
        }
    }
}
