//! The API loader lists the DRA objects (DeviceClasses, ResourceSlices, ResourceClaimTemplates,
//! ResourceClaims, DeviceTaintRules) from the real v1.37 kube-apiserver, and the snapshot groups
//! the slices by node, derives the allocated devices and applies the DeviceTaintRules to the
//! devices they select. No driver runs: the objects are created by hand.

use anyhow::{Result, ensure};
use e2e::ControlPlane;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use sched_core::snapshot::kube::{ApiLoadOptions, load_from_api};
use sched_core::snapshot::{DeviceId, Snapshot};

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T> {
    Ok(serde_json::from_value(value)?)
}

#[tokio::test]
async fn api_loader_lists_dra_objects() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("dra").await?;
    let driver = format!("{ns}.example.com");
    let class_name = format!("{ns}-gpu");
    let node_slice = format!("{ns}-node");
    let all_slice = format!("{ns}-all");
    let node_name = format!("{ns}-n1");

    let classes: Api<DeviceClass> = Api::all(client.clone());
    classes
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({
                "metadata": {"name": class_name},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]},
            }))?,
        )
        .await?;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    slices
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({
                "metadata": {"name": node_slice},
                "spec": {
                    "driver": driver,
                    "nodeName": node_name,
                    "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
                },
            }))?,
        )
        .await?;
    slices
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({
                "metadata": {"name": all_slice},
                "spec": {
                    "driver": driver,
                    "allNodes": true,
                    "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "nic-0"}],
                },
            }))?,
        )
        .await?;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &ns);
    templates
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({
                "metadata": {"name": "one-gpu"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": class_name}},
                ]}}},
            }))?,
        )
        .await?;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    claims
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({
                "metadata": {"name": "used"},
                "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": class_name}},
                ]}},
            }))?,
        )
        .await?;
    // An allocation as kube-scheduler would write it (status subresource).
    let mut claim = claims.get("used").await?;
    claim.status = Some(from_json(serde_json::json!({
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": driver, "pool": node_name, "device": "gpu-1"},
        ]}},
    }))?);
    claims
        .replace_status("used", &PostParams::default(), &claim)
        .await?;

    let listed = async {
        let (objects, warnings) = load_from_api(&client, &ApiLoadOptions::default()).await?;
        ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
        let class = objects
            .device_classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(class_name.as_str()));
        ensure!(class.is_some(), "DeviceClass {class_name} not listed");
        let snapshot = Snapshot::new(objects);
        ensure!(snapshot.device_classes.contains_key(&class_name));
        ensure!(
            snapshot
                .resource_claim_templates
                .contains_key(&format!("{ns}/one-gpu"))
        );
        ensure!(snapshot.resource_claims.contains_key(&format!("{ns}/used")));
        let ours: Vec<String> = snapshot
            .resource_slices
            .for_node(&node_name)
            .filter(|s| s.spec.driver == driver)
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        ensure!(
            ours == [node_slice.clone(), all_slice.clone()],
            "slices for {node_name}: {ours:?}"
        );
        let elsewhere = snapshot
            .resource_slices
            .for_node("elsewhere")
            .filter(|s| s.spec.driver == driver)
            .count();
        ensure!(elsewhere == 1, "slices for another node: {elsewhere}");
        let allocated: Vec<&DeviceId> = snapshot
            .allocated
            .allocated_devices
            .iter()
            .filter(|d| d.driver == driver)
            .collect();
        ensure!(
            allocated == [&DeviceId::new(&driver, &node_name, "gpu-1")],
            "allocated: {allocated:?}"
        );
        Ok(())
    }
    .await;

    // Cluster-scoped objects outlive the namespace: remove them.
    let _ = classes.delete(&class_name, &DeleteParams::default()).await;
    let _ = slices.delete(&node_slice, &DeleteParams::default()).await;
    let _ = slices.delete(&all_slice, &DeleteParams::default()).await;
    listed
}

/// Two DeviceTaintRules created through the API: one for the device gpu-1 of a node's pool, one for
/// the whole pool. `load_from_api` lists both, and `Snapshot::resource_slices` carries gpu-1 with
/// both taints and gpu-0 with the pool's only; the slice as stored has no taint.
#[tokio::test]
async fn api_loader_applies_device_taint_rules() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("dra-taint").await?;
    let driver = format!("{ns}.example.com");
    let slice_name = format!("{ns}-node");
    let node_name = format!("{ns}-n1");
    let device_rule = format!("{ns}-gpu-1");
    let pool_rule = format!("{ns}-pool");

    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let rules: Api<DeviceTaintRule> = Api::all(client.clone());
    let checked = async {
        slices
            .create(
                &PostParams::default(),
                &from_json(serde_json::json!({
                    "metadata": {"name": slice_name},
                    "spec": {
                        "driver": driver,
                        "nodeName": node_name,
                        "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
                    },
                }))?,
            )
            .await?;
        rules
            .create(
                &PostParams::default(),
                &from_json(serde_json::json!({
                    "metadata": {"name": device_rule},
                    "spec": {
                        "deviceSelector": {"driver": driver, "pool": node_name, "device": "gpu-1"},
                        "taint": {"key": "example.com/broken", "value": "true", "effect": "NoSchedule"},
                    },
                }))?,
            )
            .await?;
        rules
            .create(
                &PostParams::default(),
                &from_json(serde_json::json!({
                    "metadata": {"name": pool_rule},
                    "spec": {
                        "deviceSelector": {"driver": driver, "pool": node_name},
                        "taint": {"key": "example.com/maintenance", "effect": "NoExecute"},
                    },
                }))?,
            )
            .await?;

        let (objects, warnings) = load_from_api(&client, &ApiLoadOptions::default()).await?;
        ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
        let mut listed: Vec<String> = objects
            .device_taint_rules
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .filter(|n| n.starts_with(&ns))
            .collect();
        listed.sort();
        let mut expected = vec![device_rule.clone(), pool_rule.clone()];
        expected.sort();
        ensure!(listed == expected, "DeviceTaintRules listed: {listed:?}");
        let stored = objects
            .resource_slices
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(slice_name.as_str()))
            .ok_or_else(|| anyhow::anyhow!("ResourceSlice {slice_name} not listed"))?;
        let stored_taints = stored
            .spec
            .devices
            .iter()
            .flatten()
            .filter(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()))
            .count();
        ensure!(stored_taints == 0, "the stored slice already has taints");

        let snapshot = Snapshot::new(objects);
        let slice = snapshot
            .resource_slices
            .for_node(&node_name)
            .find(|s| s.spec.driver == driver)
            .ok_or_else(|| anyhow::anyhow!("no slice of {driver} for {node_name}"))?;
        let taints = |device: &str| -> Vec<(String, Option<String>, String)> {
            slice
                .spec
                .devices
                .iter()
                .flatten()
                .filter(|d| d.name == device)
                .flat_map(|d| d.taints.iter().flatten())
                .map(|t| (t.key.clone(), t.value.clone(), t.effect.clone()))
                .collect()
        };
        let broken = (
            "example.com/broken".to_owned(),
            Some("true".to_owned()),
            "NoSchedule".to_owned(),
        );
        let maintenance = ("example.com/maintenance".to_owned(), None, "NoExecute".to_owned());
        let gpu0 = taints("gpu-0");
        ensure!(gpu0 == [maintenance.clone()], "gpu-0's taints: {gpu0:?}");
        let mut gpu1 = taints("gpu-1");
        gpu1.sort();
        ensure!(gpu1 == [broken, maintenance], "gpu-1's taints: {gpu1:?}");
        Ok(())
    }
    .await;

    // Cluster-scoped objects outlive the namespace: remove them.
    let _ = rules.delete(&device_rule, &DeleteParams::default()).await;
    let _ = rules.delete(&pool_rule, &DeleteParams::default()).await;
    let _ = slices.delete(&slice_name, &DeleteParams::default()).await;
    checked
}
