//! DeviceTaintRules applied to ResourceSlices, as kube-scheduler's slice tracker patches them
//! (`ListPatchedResourceSlices`): a rule's taint is appended to every device its selector names, so
//! the allocator and explain see the taint as if the driver had published it.

use k8s_openapi::api::resource::v1::{DeviceTaintRule, ResourceSlice};

/// The slices with every rule's taint added to the devices it selects (driver, pool and device,
/// each optional). A rule without a selector selects nothing; rules apply in the given order.
pub fn apply(mut slices: Vec<ResourceSlice>, rules: &[DeviceTaintRule]) -> Vec<ResourceSlice> {
    if rules.is_empty() {
        return slices;
    }
    for slice in &mut slices {
        for rule in rules {
            let Some(selector) = rule.spec.device_selector.as_ref() else {
                continue;
            };
            if selector.driver.as_ref().is_some_and(|d| *d != slice.spec.driver)
                || selector.pool.as_ref().is_some_and(|p| *p != slice.spec.pool.name)
            {
                continue;
            }
            for device in slice.spec.devices.iter_mut().flatten() {
                if selector.device.as_ref().is_some_and(|d| *d != device.name) {
                    continue;
                }
                device
                    .taints
                    .get_or_insert_with(Vec::new)
                    .push(rule.spec.taint.clone());
            }
        }
    }
    slices
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn slice(driver: &str, pool: &str, devices: &[&str]) -> ResourceSlice {
        let devices: Vec<_> = devices.iter().map(|d| json!({"name": d})).collect();
        serde_json::from_value(json!({
            "metadata": {"name": format!("{driver}-{pool}")},
            "spec": {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                     "nodeName": pool, "devices": devices},
        }))
        .unwrap()
    }

    fn rule(selector: serde_json::Value) -> DeviceTaintRule {
        serde_json::from_value(json!({
            "metadata": {"name": "r"},
            "spec": {"deviceSelector": selector, "taint": {"key": "broken", "effect": "NoSchedule"}},
        }))
        .unwrap()
    }

    fn tainted(slices: &[ResourceSlice]) -> Vec<String> {
        slices
            .iter()
            .flat_map(|s| {
                s.spec
                    .devices
                    .iter()
                    .flatten()
                    .filter(|d| d.taints.is_some())
                    .map(move |d| format!("{}/{}/{}", s.spec.driver, s.spec.pool.name, d.name))
            })
            .collect()
    }

    #[test]
    fn rules_taint_exactly_the_devices_they_select() {
        let slices = || {
            vec![
                slice("gpu", "n1", &["a", "b"]),
                slice("gpu", "n2", &["a"]),
                slice("nic", "n1", &["a"]),
            ]
        };
        let cases = [
            (
                "driver",
                json!({"driver": "gpu"}),
                vec!["gpu/n1/a", "gpu/n1/b", "gpu/n2/a"],
            ),
            (
                "driver and pool",
                json!({"driver": "gpu", "pool": "n1"}),
                vec!["gpu/n1/a", "gpu/n1/b"],
            ),
            (
                "one device",
                json!({"driver": "gpu", "pool": "n2", "device": "a"}),
                vec!["gpu/n2/a"],
            ),
            (
                "device name in every pool",
                json!({"device": "a"}),
                vec!["gpu/n1/a", "gpu/n2/a", "nic/n1/a"],
            ),
            ("no match", json!({"driver": "fpga"}), vec![]),
        ];
        for (name, selector, want) in cases {
            assert_eq!(tainted(&apply(slices(), &[rule(selector)])), want, "{name}");
        }
        let mut no_selector = rule(json!({}));
        no_selector.spec.device_selector = None;
        assert!(tainted(&apply(slices(), &[no_selector])).is_empty());
    }
}
