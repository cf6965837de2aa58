//! `CycleState`: per-scheduling-cycle storage shared by a pod's plugin calls, keyed by typed keys.
//!
//! PreFilter and PreScore compute per-pod work once and store it here; Filter and Score read it per node.
//! `Clone` clones every value, which is what nominated-pod evaluation and per-node preemption dry runs
//! need (they mutate their copy through the PreFilter AddPod/RemovePod extensions).

use std::any::Any;
use std::collections::HashMap;

/// A value stored in the cycle state. Blanket-implemented for every `Clone + Send + Sync + 'static` type.
pub trait StateData: Any + Send + Sync {
    /// Clones the value behind a box.
    fn clone_box(&self) -> Box<dyn StateData>;
    /// Upcast for downcasting reads.
    fn as_any(&self) -> &dyn Any;
    /// Upcast for downcasting writes.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_box(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A typed key: the string is the state key kube-scheduler uses (e.g. "PreFilterNodeResourcesFit").
pub struct StateKey<T> {
    name: &'static str,
    _marker: std::marker::PhantomData<fn() -> T>,
}

impl<T> StateKey<T> {
    /// Declares a key; use as a `const` next to the plugin that owns it.
    pub const fn new(name: &'static str) -> Self {
        StateKey {
            name,
            _marker: std::marker::PhantomData,
        }
    }

    /// The key's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

/// Per-cycle plugin state.
#[derive(Default)]
pub struct CycleState {
    /// Read by every plugin on every node: hashed with foldhash rather than SipHash.
    storage: HashMap<&'static str, Box<dyn StateData>, foldhash::fast::RandomState>,
    /// Plugins whose PreFilter returned Skip: their Filter (and AddPod/RemovePod) are not run.
    pub skip_filter_plugins: PluginSet,
    /// Plugins whose PreScore returned Skip: their Score is not run.
    pub skip_score_plugins: PluginSet,
}

/// A set of plugin names. A profile has a few dozen plugins at most and the set is asked once per
/// plugin per node, so a scan of a short list beats hashing the name each time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginSet(Vec<&'static str>);

impl PluginSet {
    /// Adds `name`; false when it was already there.
    pub fn insert(&mut self, name: &'static str) -> bool {
        if self.contains(name) {
            return false;
        }
        self.0.push(name);
        true
    }

    /// Whether `name` is in the set.
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(&name)
    }

    /// The names, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.iter().copied()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            storage: self
                .storage
                .iter()
                .map(|(k, v)| (*k, (**v).clone_box()))
                .collect(),
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
        }
    }
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field("keys", &self.storage.keys().collect::<Vec<_>>())
            .field("skip_filter_plugins", &self.skip_filter_plugins)
            .field("skip_score_plugins", &self.skip_score_plugins)
            .finish()
    }
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a value; `None` is Go's `ErrNotFound`.
    pub fn read<T: Any>(&self, key: &StateKey<T>) -> Option<&T> {
        self.storage
            .get(key.name)
            .and_then(|v| (**v).as_any().downcast_ref::<T>())
    }

    /// Reads a value for mutation (AddPod/RemovePod extensions update PreFilter state in place).
    pub fn read_mut<T: Any>(&mut self, key: &StateKey<T>) -> Option<&mut T> {
        self.storage
            .get_mut(key.name)
            .and_then(|v| (**v).as_any_mut().downcast_mut::<T>())
    }

    /// Writes a value, replacing any previous one.
    pub fn write<T: Any + Clone + Send + Sync>(&mut self, key: &StateKey<T>, value: T) {
        self.storage.insert(key.name, Box::new(value));
    }

    /// Deletes a value.
    pub fn delete<T>(&mut self, key: &StateKey<T>) {
        self.storage.remove(key.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Counter(u32);
    const KEY: StateKey<Counter> = StateKey::new("PreFilterCounter");

    #[test]
    fn clone_is_deep() {
        let mut state = CycleState::new();
        state.write(&KEY, Counter(1));
        let mut copy = state.clone();
        copy.read_mut(&KEY).unwrap().0 = 2;
        assert_eq!(state.read(&KEY), Some(&Counter(1)));
        assert_eq!(copy.read(&KEY), Some(&Counter(2)));
    }

    #[test]
    fn missing_key_reads_none() {
        let state = CycleState::new();
        assert!(state.read(&KEY).is_none());
    }
}
