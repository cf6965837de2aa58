//! kube-scheduler's in-tree plugins, one module per plugin (folders where a plugin needs several files),
//! and the registry that maps a plugin name to its factory.

use std::collections::BTreeMap;

use crate::framework::runtime::PluginFactory;

pub mod helper;
pub mod names;

/// Go's `NewInTreeRegistry`: every plugin this engine implements, by name.
pub fn in_tree_registry() -> BTreeMap<&'static str, PluginFactory> {
    let registry: BTreeMap<&'static str, PluginFactory> = BTreeMap::new();
    registry
}
