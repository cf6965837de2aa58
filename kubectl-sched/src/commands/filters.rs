//! Every filter of a profile on one node, past the first rejection.
//!
//! kube-scheduler (and the engine's trace) stops at the first filter that rejects a node, which hides
//! whether fixing that one reason would be enough. The hints and `--node` need the other verdicts too,
//! so this runs the profile's filter plugins one by one on the cycle state the real cycle left behind.

use std::collections::BTreeMap;
use std::sync::Arc;

use sched_core::Status;
use sched_core::framework::cycle_state::CycleState;
use sched_core::framework::interface::Plugin;
use sched_core::framework::runtime::{FrameworkError, Handle, PluginFactory, ResolvedProfile};
use sched_core::snapshot::{NodeInfo, PodInfo, Snapshot};

/// What one filter plugin said, if it ran.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The plugin's status.
    Ran(Status),
    /// Its PreFilter returned Skip: kube-scheduler does not run its Filter for this pod.
    Skipped,
}

/// The profile's filter plugins, instantiated once.
pub struct AllFilters {
    plugins: Vec<Arc<dyn Plugin>>,
}

impl std::fmt::Debug for AllFilters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.plugins.iter().map(|p| p.name()).collect();
        f.debug_struct("AllFilters").field("plugins", &names).finish()
    }
}

impl AllFilters {
    /// Builds the filter plugins of `profile` (in profile order) on `snapshot`.
    pub fn new(
        profile: &ResolvedProfile,
        registry: &BTreeMap<&'static str, PluginFactory>,
        snapshot: Arc<Snapshot>,
    ) -> Result<AllFilters, FrameworkError> {
        let handle = Handle { snapshot };
        let mut plugins = Vec::with_capacity(profile.filter.len());
        for name in &profile.filter {
            let factory = registry
                .get(name.as_str())
                .ok_or_else(|| FrameworkError::UnknownPlugin(name.clone()))?;
            let plugin = factory(profile.plugin_args.get(name), &handle)?;
            if plugin.as_filter().is_some() {
                plugins.push(plugin);
            }
        }
        Ok(AllFilters { plugins })
    }

    /// Every filter's verdict on `node`, in profile order. `state` must be the cycle state after
    /// PreFilter succeeded. Pods nominated to the node are not added (kube-scheduler's own verdict,
    /// in the explanation, accounts for them).
    pub fn run(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Vec<(&'static str, Verdict)> {
        self.plugins
            .iter()
            .filter_map(|p| {
                let filter = p.as_filter()?;
                if state.skip_filter_plugins.contains(p.name()) {
                    return Some((p.name(), Verdict::Skipped));
                }
                Some((
                    p.name(),
                    Verdict::Ran(filter.filter(state, pod, node).with_plugin(p.name())),
                ))
            })
            .collect()
    }

    /// The rejections among [`AllFilters::run`]'s verdicts, except those of `except`.
    pub fn other_rejections(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        except: &str,
    ) -> Vec<(&'static str, Status)> {
        self.run(state, pod, node)
            .into_iter()
            .filter_map(|(name, v)| match v {
                Verdict::Ran(s) if !s.is_success() && name != except => Some((name, s)),
                _ => None,
            })
            .collect()
    }
}
