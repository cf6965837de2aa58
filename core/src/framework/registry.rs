//! The plugin registry (Go's `framework/runtime/registry.go`): plugin factories by name, the feature
//! gates they are built with, and the MultiPoint plugins a profile gets by default. The framework
//! reads it; `plugins::in_tree_registry` fills it, so nothing in the framework names a plugin.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::features::FeatureGates;
use crate::framework::interface::Plugin;
use crate::framework::profile::PluginRef;
use crate::framework::runtime::{Handle, PluginError};

/// Builds a plugin from its args (the `pluginConfig` entry as JSON, `None` for defaults) and the
/// registry's feature gates (what Go's `runtime.FactoryAdapter` passes to a plugin's `New`).
pub type PluginFactory = fn(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError>;

/// A plugin registry: the factories by name (Go's `Registry`), the feature gates every factory
/// receives, and the MultiPoint plugins a profile gets when its configuration does not say otherwise
/// (Go's `getDefaultPlugins`, itself derived from the gates). The framework only reads it;
/// `plugins::in_tree_registry` fills it, so the framework never names a plugin.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<&'static str, PluginFactory>,
    features: FeatureGates,
    default_multi_point: Vec<PluginRef>,
    /// The plugin names the release's kube-scheduler registers (and the engine's extensions);
    /// `None`: no release table, every name is checked against the factories only.
    known_to_release: Option<Vec<&'static str>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("plugins", &self.factories.keys().collect::<Vec<_>>())
            .field("features", &self.features)
            .field("default_multi_point", &self.default_multi_point)
            .field("known_to_release", &self.known_to_release)
            .finish()
    }
}

impl Registry {
    /// An empty registry whose plugins are built with `features` and whose profiles default to
    /// `default_multi_point`.
    pub fn new(features: FeatureGates, default_multi_point: Vec<PluginRef>) -> Self {
        Registry {
            factories: BTreeMap::new(),
            features,
            default_multi_point,
            known_to_release: None,
        }
    }

    /// Sets the plugin names the release's kube-scheduler registers: a profile naming any other
    /// is refused as that release refuses it (`PreFilterPlugin "X" does not exist`).
    pub fn set_known_to_release(&mut self, names: Vec<&'static str>) {
        self.known_to_release = Some(names);
    }

    /// Whether the release's kube-scheduler registers a plugin of this name (true without a
    /// release table).
    pub fn known_to_release(&self, name: &str) -> bool {
        self.known_to_release
            .as_ref()
            .is_none_or(|names| names.contains(&name))
    }

    /// Whether the release table lists a plugin of this name (false without a release table).
    pub fn listed_by_release(&self, name: &str) -> bool {
        self.known_to_release
            .as_ref()
            .is_some_and(|names| names.contains(&name))
    }

    /// The feature gates every factory of this registry receives.
    pub fn features(&self) -> &FeatureGates {
        &self.features
    }

    /// Builds the plugin registered as `name` with this registry's feature gates; `None` when no
    /// plugin of that name is registered.
    pub fn build(
        &self,
        name: &str,
        args: Option<&serde_json::Value>,
        handle: &Handle,
    ) -> Option<Result<Arc<dyn Plugin>, PluginError>> {
        self.get(name)
            .map(|factory| factory(args, handle, &self.features))
    }

    /// Registers (or replaces) a plugin's factory.
    pub fn insert(&mut self, name: &'static str, factory: PluginFactory) {
        self.factories.insert(name, factory);
    }

    /// A plugin's factory.
    pub fn get(&self, name: &str) -> Option<&PluginFactory> {
        self.factories.get(name)
    }

    /// True when the plugin is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.factories.contains_key(name)
    }

    /// The registered plugins, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &PluginFactory)> {
        self.factories.iter().map(|(name, factory)| (*name, factory))
    }

    /// The MultiPoint plugins of a profile that does not change them.
    pub fn default_multi_point(&self) -> &[PluginRef] {
        &self.default_multi_point
    }
}
