//! Shared counters of partitionable devices (`checkAvailableCounters`,
//! `deallocateCountersForDevice`): what a pool's counter sets still offer after the devices of
//! allocated claims, and what the devices being allocated consume.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::resource::v1::Device;

use super::pools::{Pool, devices};
use super::quantity::ExactQuantity;

/// Counter values by counter set, then by counter name.
pub type CounterSets<'a> = HashMap<&'a str, BTreeMap<&'a str, ExactQuantity>>;

/// What the pool's counter sets offer minus what the `allocated` devices (of any slice of the
/// pool) consume. May go negative, which counts as nothing available.
pub fn available<'a>(pool: &Pool<'a>, allocated: impl Fn(&str, &str, &str) -> bool) -> CounterSets<'a> {
    let mut sets: CounterSets<'a> = pool
        .counter_sets
        .iter()
        .map(|(name, set)| {
            let counters = set
                .counters
                .iter()
                .map(|(n, c)| (n.as_str(), ExactQuantity::from_quantity(&c.value)))
                .collect();
            (*name, counters)
        })
        .collect();
    for slice in pool
        .device_slices
        .iter()
        .chain(&pool.device_slices_not_targeting_node)
    {
        for device in devices(slice) {
            if !allocated(&slice.spec.driver, &slice.spec.pool.name, &device.name) {
                continue;
            }
            for consumption in device.consumes_counters.iter().flatten() {
                let Some(set) = sets.get_mut(consumption.counter_set.as_str()) else {
                    continue;
                };
                for (name, c) in &consumption.counters {
                    if let Some(v) = set.get_mut(name.as_str()) {
                        v.sub(&ExactQuantity::from_quantity(&c.value));
                    }
                }
            }
        }
    }
    sets
}

/// Adds (`add`) or removes what `device` consumes to or from `consumed`.
pub fn account<'a>(consumed: &mut CounterSets<'a>, device: &'a Device, add: bool) {
    for consumption in device.consumes_counters.iter().flatten() {
        let set = consumed.entry(consumption.counter_set.as_str()).or_default();
        for (name, c) in &consumption.counters {
            let v = ExactQuantity::from_quantity(&c.value);
            let entry = set.entry(name.as_str()).or_insert(ExactQuantity::ZERO);
            if add {
                entry.add(&v);
            } else {
                entry.sub(&v);
            }
        }
    }
}

/// Whether `consumed` exceeds `available` for some counter.
pub fn exceeded(available: &CounterSets<'_>, consumed: &CounterSets<'_>) -> bool {
    available.iter().any(|(set, counters)| {
        counters.iter().any(|(name, available)| {
            let used = consumed
                .get(set)
                .and_then(|s| s.get(name))
                .copied()
                .unwrap_or(ExactQuantity::ZERO);
            *available < used
        })
    })
}
