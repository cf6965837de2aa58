//! The API loader lists the DRA objects (DeviceClasses, ResourceSlices, ResourceClaimTemplates,
//! ResourceClaims) from the real v1.37 kube-apiserver, and the snapshot groups the slices by node
//! and derives the allocated devices. No driver runs: the objects are created by hand.

use anyhow::{Result, ensure};
use e2e::ControlPlane;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
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
