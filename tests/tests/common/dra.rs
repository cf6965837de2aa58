//! Dynamic Resource Allocation for the differential lab: DeviceClasses, ResourceSlices,
//! ResourceClaims and ResourceClaimTemplates built as the JSON a driver or a user would apply
//! (no driver runs: slices are published by hand), claims allocated by hand through the status
//! subresource, and the comparison of kube-scheduler's real allocations with sched-core's
//! `claim_allocations`.
//!
//! Names are unique per scenario: the driver is `<id>.example.com`, classes, slices and pools are
//! `<id>-<short>`, so no cluster-scoped object of one scenario can match a request of another;
//! [`clean_dra`] (run when a lab begins) also deletes every claim, slice, class and DeviceTaintRule.
//!
//! Objects are created through `DynamicObject` so that every field reaches the API server exactly
//! as written (a typed round trip would silently drop a field the client types lack).

use anyhow::{Context, Result, bail, ensure};
use e2e::fixtures::eventually;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use sched_core::explain::{AllocatedDevice, ClaimAllocation, Outcome};
use serde_json::{Value, json};

use super::{Lab, PodBuilder, SETUP_TIMEOUT, Trial, Verdict, evaluate, is_not_found};

/// `resource.k8s.io/v1` `kind` (`plural`).
fn resource_api(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1".into(),
        api_version: "resource.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn device_classes() -> ApiResource {
    resource_api("DeviceClass", "deviceclasses")
}

fn resource_slices() -> ApiResource {
    resource_api("ResourceSlice", "resourceslices")
}

fn resource_claims() -> ApiResource {
    resource_api("ResourceClaim", "resourceclaims")
}

fn resource_claim_templates() -> ApiResource {
    resource_api("ResourceClaimTemplate", "resourceclaimtemplates")
}

fn device_taint_rules() -> ApiResource {
    resource_api("DeviceTaintRule", "devicetaintrules")
}

fn pods() -> ApiResource {
    ApiResource::erase::<Pod>(&())
}

fn dynamic(api: &ApiResource, value: Value) -> Result<DynamicObject> {
    let mut value = value;
    value["apiVersion"] = json!(api.api_version);
    value["kind"] = json!(api.kind);
    serde_json::from_value(value.clone()).with_context(|| format!("{value}"))
}

/// Fails, in one line, on a control plane whose kube-scheduler does not read resource.k8s.io/v1
/// (v1.33: DRA is v1beta1 there, not served and off by default): the DRA scenarios build their
/// objects at v1. `make difftest-versions` leaves the DRA suites out on such a release.
pub fn ensure_dra_served(lab: &Lab) -> Result<()> {
    let release = lab.engine.features().version;
    ensure!(
        sched_core::features::api_versions::scheduler_reads_at(release, "DeviceClass", "resource.k8s.io/v1"),
        "the DRA scenarios need a release whose kube-scheduler reads resource.k8s.io/v1 (v1.34 or later); \
         this control plane runs {release}"
    );
    Ok(())
}

/// Whether the DRA feature `gate` is on in the control plane's release (`on`: the caller reads it
/// from `lab.engine.features()`, the same gates sched-core evaluates with). When it is off the
/// scenario asserts the off behaviour instead, and this says so in the output.
pub fn gate_on(lab: &Lab, gate: &str, on: bool) -> bool {
    if !on {
        eprintln!(
            "  {gate} is off on {}: the scenario asserts the behaviour without it",
            lab.engine.features().version
        );
    }
    on
}

/// Whether the control plane's release can run a scenario that needs `what`; when it cannot
/// (its API server refuses the objects, or its kube-scheduler does not read them) this prints why
/// the scenario is skipped on that release.
pub fn runnable_on(lab: &Lab, what: &str, runnable: bool) -> bool {
    if !runnable {
        eprintln!("  SKIPPED on {}: {what}", lab.engine.features().version);
    }
    runnable
}

/// A device of a ResourceSlice.
#[derive(Clone, Debug)]
pub struct DeviceBuilder(Value);

/// A device `name` without attributes or capacity.
pub fn device(name: &str) -> DeviceBuilder {
    DeviceBuilder(json!({"name": name}))
}

impl DeviceBuilder {
    /// An attribute: a JSON string, integer or boolean becomes `string`, `int` or `bool`; an
    /// object is taken as is (e.g. `{"version": "1.2.3"}`).
    pub fn attr(mut self, name: &str, value: Value) -> Self {
        let typed = match value {
            Value::String(s) => json!({"string": s}),
            Value::Bool(b) => json!({"bool": b}),
            Value::Number(n) => json!({"int": n}),
            other => other,
        };
        self.0["attributes"][name] = typed;
        self
    }

    /// A capacity `name` of `value` (a quantity).
    pub fn capacity(mut self, name: &str, value: &str) -> Self {
        self.0["capacity"][name] = json!({"value": value});
        self
    }

    /// A capacity with a `requestPolicy` (consumable capacity).
    pub fn capacity_policy(mut self, name: &str, value: &str, policy: Value) -> Self {
        self.0["capacity"][name] = json!({"value": value, "requestPolicy": policy});
        self
    }

    /// `allowMultipleAllocations: true` (consumable capacity: several claims share the device).
    pub fn shareable(self) -> Self {
        self.field("allowMultipleAllocations", json!(true))
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let taint = json!({"key": key, "value": value, "effect": effect});
        match self.0["taints"].as_array_mut() {
            Some(list) => list.push(taint),
            None => self.0["taints"] = json!([taint]),
        }
        self
    }

    /// Consumes `counters` (name, quantity) of the shared counter set `set` (partitionable devices).
    pub fn consumes(mut self, set: &str, counters: &[(&str, &str)]) -> Self {
        let counters: serde_json::Map<String, Value> = counters
            .iter()
            .map(|(name, value)| ((*name).to_owned(), json!({"value": value})))
            .collect();
        let entry = json!({"counterSet": set, "counters": counters});
        match self.0["consumesCounters"].as_array_mut() {
            Some(list) => list.push(entry),
            None => self.0["consumesCounters"] = json!([entry]),
        }
        self
    }

    /// Sets any other field of the device.
    pub fn field(mut self, key: &str, value: Value) -> Self {
        self.0[key] = value;
        self
    }
}

/// A ResourceSlice of the scenario's driver.
#[derive(Clone, Debug)]
pub struct SliceBuilder(Value);

impl SliceBuilder {
    /// `spec.nodeName` (a full node name).
    pub fn node(self, node: &str) -> Self {
        self.spec("nodeName", json!(node))
    }

    /// `spec.allNodes: true`.
    pub fn all_nodes(self) -> Self {
        self.spec("allNodes", json!(true))
    }

    /// `spec.nodeSelector`: nodes whose label `key` is `value`.
    pub fn node_label(self, key: &str, value: &str) -> Self {
        self.spec(
            "nodeSelector",
            json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": key, "operator": "In", "values": [value]},
            ]}]}),
        )
    }

    /// The pool (full name), its generation and how many slices it has.
    pub fn pool(self, name: &str, generation: i64, slices: i64) -> Self {
        self.spec(
            "pool",
            json!({"name": name, "generation": generation, "resourceSliceCount": slices}),
        )
    }

    pub fn device(mut self, device: DeviceBuilder) -> Self {
        match self.0["spec"]["devices"].as_array_mut() {
            Some(list) => list.push(device.0),
            None => self.0["spec"]["devices"] = json!([device.0]),
        }
        self
    }

    pub fn devices(self, devices: impl IntoIterator<Item = DeviceBuilder>) -> Self {
        devices.into_iter().fold(self, Self::device)
    }

    /// A shared counter set `name` (partitionable devices).
    pub fn counter_set(mut self, name: &str, counters: &[(&str, &str)]) -> Self {
        let counters: serde_json::Map<String, Value> = counters
            .iter()
            .map(|(name, value)| ((*name).to_owned(), json!({"value": value})))
            .collect();
        let set = json!({"name": name, "counters": counters});
        match self.0["spec"]["sharedCounters"].as_array_mut() {
            Some(list) => list.push(set),
            None => self.0["spec"]["sharedCounters"] = json!([set]),
        }
        self
    }

    /// Sets `spec.<key>`.
    pub fn spec(mut self, key: &str, value: Value) -> Self {
        self.0["spec"][key] = value;
        self
    }
}

/// A DeviceClass.
#[derive(Clone, Debug)]
pub struct ClassBuilder(Value);

impl ClassBuilder {
    /// One more CEL selector.
    pub fn selector(mut self, expression: &str) -> Self {
        let selector = json!({"cel": {"expression": expression}});
        match self.0["spec"]["selectors"].as_array_mut() {
            Some(list) => list.push(selector),
            None => self.0["spec"]["selectors"] = json!([selector]),
        }
        self
    }

    /// `spec.extendedResourceName`: pods requesting this extended resource get a device of the
    /// class where no node advertises the resource.
    pub fn extended_resource(mut self, name: &str) -> Self {
        self.0["spec"]["extendedResourceName"] = json!(name);
        self
    }

    pub fn name(&self) -> &str {
        self.0["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// One request of a claim (`exactly`), or one subrequest of a `firstAvailable` list.
#[derive(Clone, Debug)]
pub struct RequestBuilder {
    name: String,
    body: Value,
}

/// A request `name` for one device of the class `class` (full name).
pub fn request(name: &str, class: &str) -> RequestBuilder {
    RequestBuilder {
        name: name.to_owned(),
        body: json!({"deviceClassName": class}),
    }
}

impl RequestBuilder {
    pub fn selector(mut self, expression: &str) -> Self {
        let selector = json!({"cel": {"expression": expression}});
        match self.body["selectors"].as_array_mut() {
            Some(list) => list.push(selector),
            None => self.body["selectors"] = json!([selector]),
        }
        self
    }

    /// `allocationMode: ExactCount` with `count`.
    pub fn count(self, count: i64) -> Self {
        self.field("allocationMode", json!("ExactCount"))
            .field("count", json!(count))
    }

    /// `allocationMode: All`.
    pub fn all(self) -> Self {
        self.field("allocationMode", json!("All"))
    }

    pub fn admin_access(self) -> Self {
        self.field("adminAccess", json!(true))
    }

    pub fn toleration(mut self, toleration: Value) -> Self {
        match self.body["tolerations"].as_array_mut() {
            Some(list) => list.push(toleration),
            None => self.body["tolerations"] = json!([toleration]),
        }
        self
    }

    /// `capacity.requests.<name>` (consumable capacity).
    pub fn capacity(mut self, name: &str, amount: &str) -> Self {
        self.body["capacity"]["requests"][name] = json!(amount);
        self
    }

    pub fn field(mut self, key: &str, value: Value) -> Self {
        self.body[key] = value;
        self
    }

    /// As a request of a claim: `{name, exactly: {...}}`.
    fn exactly(&self) -> Value {
        json!({"name": self.name, "exactly": self.body})
    }

    /// As a subrequest: `{name, ...}`.
    fn subrequest(&self) -> Value {
        let mut value = self.body.clone();
        value["name"] = json!(self.name);
        value
    }
}

/// A request `name` satisfied by the first of `subrequests` that can be allocated.
pub fn first_available(name: &str, subrequests: &[RequestBuilder]) -> Value {
    json!({
        "name": name,
        "firstAvailable": subrequests.iter().map(RequestBuilder::subrequest).collect::<Vec<_>>(),
    })
}

/// A ResourceClaim (or the claim spec of a template).
#[derive(Clone, Debug)]
pub struct ClaimBuilder(Value);

/// A claim `name` without requests.
pub fn claim(name: &str) -> ClaimBuilder {
    ClaimBuilder(json!({"metadata": {"name": name}, "spec": {"devices": {"requests": []}}}))
}

impl ClaimBuilder {
    pub fn request(self, request: RequestBuilder) -> Self {
        self.raw_request(request.exactly())
    }

    /// A request as JSON (e.g. [`first_available`]).
    pub fn raw_request(mut self, request: Value) -> Self {
        if let Some(list) = self.0["spec"]["devices"]["requests"].as_array_mut() {
            list.push(request);
        }
        self
    }

    /// A `matchAttribute` constraint on `requests` (all requests when empty).
    pub fn match_attribute(mut self, attribute: &str, requests: &[&str]) -> Self {
        let mut constraint = json!({"matchAttribute": attribute});
        if !requests.is_empty() {
            constraint["requests"] = json!(requests);
        }
        match self.0["spec"]["devices"]["constraints"].as_array_mut() {
            Some(list) => list.push(constraint),
            None => self.0["spec"]["devices"]["constraints"] = json!([constraint]),
        }
        self
    }

    /// A finalizer (keeps a deleted claim around, being deleted).
    pub fn finalizer(mut self, finalizer: &str) -> Self {
        self.0["metadata"]["finalizers"] = json!([finalizer]);
        self
    }

    pub fn name(&self) -> &str {
        self.0["metadata"]["name"].as_str().unwrap_or_default()
    }
}

impl PodBuilder {
    /// `spec.resourceClaims[]` entry `name` for the ResourceClaim `claim`, used by the container.
    pub fn resource_claim(self, name: &str, claim: &str) -> Self {
        self.pod_claim(json!({"name": name, "resourceClaimName": claim}))
    }

    /// `spec.resourceClaims[]` entry `name` for a claim made from the template `template`.
    pub fn claim_template(self, name: &str, template: &str) -> Self {
        self.pod_claim(json!({"name": name, "resourceClaimTemplateName": template}))
    }

    fn pod_claim(mut self, entry: Value) -> Self {
        let name = entry["name"].clone();
        let spec = &mut self.value["spec"];
        match spec["resourceClaims"].as_array_mut() {
            Some(list) => list.push(entry),
            None => spec["resourceClaims"] = json!([entry]),
        }
        let resources = &mut self.container()["resources"];
        match resources["claims"].as_array_mut() {
            Some(list) => list.push(json!({"name": name})),
            None => resources["claims"] = json!([{"name": name}]),
        }
        self
    }
}

/// One allocated device as kube-scheduler wrote it (`status.allocation.devices.results[]`).
fn allocated_device(result: &Value) -> AllocatedDevice {
    let field = |key: &str| result[key].as_str().unwrap_or_default().to_owned();
    AllocatedDevice {
        request: field("request"),
        driver: field("driver"),
        pool: field("pool"),
        device: field("device"),
    }
}

/// A claim kube-scheduler (or the scenario) allocated, read from the API.
#[derive(Clone, Debug)]
pub struct KubeAllocation {
    /// The pod's `spec.resourceClaims[].name`, or `extended-resources` for the claim kube-scheduler
    /// made for extended resources backed by DRA.
    pub pod_claim: String,
    /// `namespace/name`.
    pub claim: String,
    pub devices: Vec<AllocatedDevice>,
    /// The whole `status.allocation`.
    pub allocation: Value,
}

/// The pod claim name of the claim kube-scheduler creates for extended resources backed by DRA.
pub const EXTENDED_RESOURCES: &str = "extended-resources";

impl Lab {
    /// The scenario's driver: `<id>.example.com`.
    pub fn driver(&self) -> String {
        format!("{}.example.com", self.id)
    }

    /// A DeviceClass `<id>-<short>` selecting the scenario's driver.
    pub fn class(&self, short: &str) -> ClassBuilder {
        let class = ClassBuilder(json!({"metadata": {"name": self.n(short)}, "spec": {}}));
        class.selector(&format!("device.driver == \"{}\"", self.driver()))
    }

    /// A ResourceSlice `<id>-<short>` of the scenario's driver, alone in its pool `<id>-<short>`.
    pub fn slice(&self, short: &str) -> SliceBuilder {
        SliceBuilder(json!({
            "metadata": {"name": self.n(short)},
            "spec": {
                "driver": self.driver(),
                "pool": {"name": self.n(short), "generation": 1, "resourceSliceCount": 1},
            },
        }))
    }

    /// The slice of node `short`'s own pool (named after the node, as a kubelet plugin does).
    pub fn node_slice(&self, short: &str, devices: impl IntoIterator<Item = DeviceBuilder>) -> SliceBuilder {
        self.slice(short)
            .node(&self.n(short))
            .pool(&self.n(short), 1, 1)
            .devices(devices)
    }

    /// `device.attributes["<driver>"].<name>` in CEL.
    pub fn attr(&self, name: &str) -> String {
        format!("device.attributes[\"{}\"].{name}", self.driver())
    }

    /// `device.capacity["<driver>"].<name>` in CEL.
    pub fn cap(&self, name: &str) -> String {
        format!("device.capacity[\"{}\"].{name}", self.driver())
    }

    async fn create_dynamic(&self, api: &ApiResource, namespaced: bool, value: Value) -> Result<()> {
        let object = dynamic(api, value.clone())?;
        let client: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(self.client.clone(), &self.ns, api)
        } else {
            Api::all_with(self.client.clone(), api)
        };
        client
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating {} {value}", api.kind))?;
        Ok(())
    }

    pub async fn create_classes(&self, classes: impl IntoIterator<Item = ClassBuilder>) -> Result<()> {
        for class in classes {
            self.create_dynamic(&device_classes(), false, class.0).await?;
        }
        Ok(())
    }

    pub async fn create_slices(&self, slices: impl IntoIterator<Item = SliceBuilder>) -> Result<()> {
        for slice in slices {
            self.create_dynamic(&resource_slices(), false, slice.0).await?;
        }
        Ok(())
    }

    /// Creates a DeviceTaintRule `<id>-<short>` putting `taint` on the device `device` of the
    /// pool `pool` (full name) of the scenario's driver; the API server's refusal is handed back
    /// (the outer error is anything else).
    pub async fn try_create_taint_rule(
        &self,
        short: &str,
        pool: &str,
        device: &str,
        taint: Value,
    ) -> Result<Result<(), kube::Error>> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &device_taint_rules());
        let object = dynamic(
            &device_taint_rules(),
            json!({
                "metadata": {"name": self.n(short)},
                "spec": {
                    "deviceSelector": {"driver": self.driver(), "pool": pool, "device": device},
                    "taint": taint,
                },
            }),
        )?;
        Ok(api.create(&PostParams::default(), &object).await.map(|_| ()))
    }

    /// Creates ResourceClaims in the scenario's namespace.
    pub async fn create_claims(&self, claims: impl IntoIterator<Item = ClaimBuilder>) -> Result<()> {
        for claim in claims {
            self.create_dynamic(&resource_claims(), true, claim.0).await?;
        }
        Ok(())
    }

    /// As [`Self::create_claims`] for one claim, handing back the API server's refusal (the
    /// outer error is anything else).
    pub async fn try_create_claim(&self, claim: ClaimBuilder) -> Result<Result<(), kube::Error>> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.ns, &resource_claims());
        let object = dynamic(&resource_claims(), claim.0)?;
        Ok(api.create(&PostParams::default(), &object).await.map(|_| ()))
    }

    /// Deletes the claim `name` of the scenario's namespace (it stays, being deleted, while a
    /// finalizer holds it).
    pub async fn delete_claim(&self, name: &str) -> Result<()> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.ns, &resource_claims());
        api.delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting claim {name}"))?;
        Ok(())
    }

    /// Creates a ResourceClaimTemplate `name` whose claims are `claim`'s spec.
    pub async fn create_template(&self, name: &str, claim: &ClaimBuilder) -> Result<()> {
        let value = json!({"metadata": {"name": name}, "spec": {"spec": claim.0["spec"]}});
        self.create_dynamic(&resource_claim_templates(), true, value)
            .await
    }

    /// Labels the scenario's namespace (e.g. `resource.kubernetes.io/admin-access`).
    pub async fn label_namespace(&self, key: &str, value: &str) -> Result<()> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        api.patch(
            &self.ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .with_context(|| format!("labelling namespace {}", self.ns))?;
        Ok(())
    }

    /// Writes `status` on the claim `name` of the scenario's namespace (an allocation made by
    /// hand, as kube-scheduler would write it).
    pub async fn write_claim_status(&self, name: &str, status: Value) -> Result<()> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.ns, &resource_claims());
        let mut claim = api.get(name).await.with_context(|| format!("claim {name}"))?;
        claim.data["status"] = status;
        api.replace_status(name, &PostParams::default(), &claim)
            .await
            .with_context(|| format!("writing the status of claim {name}"))?;
        Ok(())
    }

    /// Allocates the claim `name` by hand to `devices` (request, pool, device) of the scenario's
    /// driver, for node `node` (full name) when given.
    pub async fn allocate_by_hand(
        &self,
        name: &str,
        node: Option<&str>,
        devices: &[(&str, &str, &str)],
    ) -> Result<()> {
        let results: Vec<Value> = devices
            .iter()
            .map(|(request, pool, device)| {
                json!({"request": request, "driver": self.driver(), "pool": pool, "device": device})
            })
            .collect();
        let mut allocation = json!({"devices": {"results": results}});
        if let Some(node) = node {
            allocation["nodeSelector"] = json!({"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]},
            ]}]});
        }
        self.write_claim_status(name, json!({"allocation": allocation}))
            .await
    }

    /// Creates `pending` without `nodeName` and waits for kube-scheduler to bind it (allocating
    /// its claims on the way): a way to have claims allocated by kube-scheduler itself before a
    /// trial. Returns the node.
    pub async fn schedule_first(&self, pending: PodBuilder) -> Result<String> {
        let created = self.create_pod(&pending).await?;
        match self.verdict(&created, super::VERDICT_TIMEOUT).await? {
            Verdict::Bound(node) => {
                eprintln!(
                    "[differential] {}: setup pod {} bound to {node}",
                    self.id,
                    pending.name()
                );
                Ok(node)
            }
            other => bail!(
                "{}: setup pod {} was not bound: {other:?}",
                self.id,
                pending.name()
            ),
        }
    }

    /// kube-scheduler's verdict on a pod already created (e.g. once a condition it waits for in
    /// PreBind is reported): bound, or its first FailedScheduling message.
    pub async fn wait_verdict(&self, pod: &Pod) -> Result<Verdict> {
        self.verdict(pod, super::VERDICT_TIMEOUT).await
    }

    /// As [`Self::wait_verdict`] with three verdict windows, for a pod whose claims kube-scheduler
    /// must allocate right after they changed: slower on a busy machine (CI).
    pub async fn wait_verdict_patiently(&self, pod: &Pod) -> Result<Verdict> {
        self.verdict(pod, super::VERDICT_TIMEOUT * 3).await
    }

    /// For pods with claim templates: creates `pending` held by a scheduling gate, waits for
    /// kube-controller-manager to create its claims, snapshots, lifts the gate, and evaluates the
    /// pod as it is then (its `status.resourceClaimStatuses` naming the claims), so sched-core
    /// sees the claims kube-scheduler sees.
    pub async fn trial_generated(&self, pending: PodBuilder) -> Result<Trial> {
        const GATE: &str = "e2e.example.com/claims";
        let name = pending.name().to_owned();
        let templates: Vec<String> = pending.value["spec"]["resourceClaims"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["resourceClaimTemplateName"].is_string())
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect();
        self.create_pod(&pending.gate(GATE)).await?;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let claims: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.ns, &resource_claims());
        eventually("the pod's claims to be generated", SETUP_TIMEOUT, || async {
            let pod = pods.get(&name).await?;
            let statuses = pod
                .status
                .and_then(|s| s.resource_claim_statuses)
                .unwrap_or_default();
            for template in &templates {
                let Some(claim) = statuses
                    .iter()
                    .find(|s| &s.name == template)
                    .and_then(|s| s.resource_claim_name.clone())
                else {
                    return Ok(None);
                };
                if claims.get_opt(&claim).await?.is_none() {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        })
        .await
        .with_context(|| self.cp.log_tail("kube-controller-manager", 20))?;
        tokio::time::sleep(super::SETTLE).await;
        let snapshot = self.snapshot().await?;
        let ungated = pods
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"schedulingGates": null}})),
            )
            .await
            .context("lifting the scheduling gate")?;
        let ours = evaluate(snapshot, &ungated)?;
        let kube = self.verdict(&ungated, super::VERDICT_TIMEOUT).await?;
        Ok(Trial {
            scenario: self.id.clone(),
            pod: ungated,
            kube,
            ours,
            elapsed: self.started.elapsed(),
        })
    }

    /// The allocations of `pod`'s claims as the API server has them now, in the order of
    /// `spec.resourceClaims`, then the extended-resource claim kube-scheduler made, if any.
    /// Claims not allocated are left out.
    pub async fn kube_allocations(&self, pod: &str) -> Result<Vec<KubeAllocation>> {
        let pods: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.ns, &pods());
        let claims: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.ns, &resource_claims());
        let live = pods.get(pod).await?.data;
        let mut names: Vec<(String, String)> = Vec::new();
        for entry in live["spec"]["resourceClaims"].as_array().into_iter().flatten() {
            let pod_claim = entry["name"].as_str().unwrap_or_default().to_owned();
            let claim = match entry["resourceClaimName"].as_str() {
                Some(claim) => Some(claim.to_owned()),
                None => live["status"]["resourceClaimStatuses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|s| s["name"] == json!(pod_claim))
                    .and_then(|s| s["resourceClaimName"].as_str().map(str::to_owned)),
            };
            if let Some(claim) = claim {
                names.push((pod_claim, claim));
            }
        }
        if let Some(claim) = live["status"]["extendedResourceClaimStatus"]["resourceClaimName"].as_str() {
            names.push((EXTENDED_RESOURCES.to_owned(), claim.to_owned()));
        }
        let mut out = Vec::new();
        for (pod_claim, name) in names {
            let Some(claim) = claims.get_opt(&name).await? else {
                continue;
            };
            let allocation = claim.data["status"]["allocation"].clone();
            if allocation.is_null() {
                continue;
            }
            let devices = allocation["devices"]["results"]
                .as_array()
                .into_iter()
                .flatten()
                .map(allocated_device)
                .collect();
            out.push(KubeAllocation {
                pod_claim,
                claim: format!("{}/{name}", self.ns),
                devices,
                allocation,
            });
        }
        Ok(out)
    }
}

fn device_names(devices: &[AllocatedDevice]) -> Vec<String> {
    devices
        .iter()
        .map(|d| format!("{}:{}/{}", d.request, d.pool, d.device))
        .collect()
}

impl Trial {
    /// kube-scheduler bound the pod (to `node` when given) and allocated, for each pod claim of
    /// `expected` (`spec.resourceClaims[].name`, or [`EXTENDED_RESOURCES`]), exactly these devices
    /// (`request:pool/device`, full names, in order); then sched-core must agree on the node and
    /// pick the same devices for every claim kube-scheduler allocated in the trial.
    pub async fn expect_allocated(
        &self,
        lab: &Lab,
        node: Option<&str>,
        expected: &[(&str, &[String])],
    ) -> Result<Vec<KubeAllocation>> {
        let kube = self.kube_allocated(lab, node, expected).await?;
        self.expect_devices(&kube, expected)?;
        Ok(kube)
    }

    /// The kube-scheduler half of [`Self::expect_allocated`]: the scenario exercises what it
    /// claims. Returns kube-scheduler's allocations (for further checks of the scenario) without
    /// looking at sched-core.
    pub async fn kube_allocated(
        &self,
        lab: &Lab,
        node: Option<&str>,
        expected: &[(&str, &[String])],
    ) -> Result<Vec<KubeAllocation>> {
        self.report();
        self.bound_to(node)?;
        let pod = self.pod.metadata.name.clone().unwrap_or_default();
        let kube = lab.kube_allocations(&pod).await?;
        for allocation in &kube {
            eprintln!(
                "  kube-scheduler allocated {} ({}): {:?}",
                allocation.claim,
                allocation.pod_claim,
                device_names(&allocation.devices)
            );
        }
        eprintln!(
            "  sched-core allocations: {:?}",
            self.ours
                .claim_allocations
                .iter()
                .map(|c| (&c.claim, &c.node, device_names(&c.devices)))
                .collect::<Vec<_>>()
        );
        for (pod_claim, devices) in expected {
            let Some(allocation) = kube.iter().find(|a| a.pod_claim == *pod_claim) else {
                bail!(
                    "{}: kube-scheduler allocated no claim for {pod_claim:?} (the scenario does \
                     not exercise what it claims)",
                    self.scenario
                );
            };
            let got = device_names(&allocation.devices);
            ensure!(
                got.as_slice() == *devices,
                "{}: kube-scheduler allocated {got:?} for {pod_claim:?}, the scenario expects \
                 {devices:?}",
                self.scenario
            );
        }
        Ok(kube)
    }

    /// kube-scheduler's scheduling cycle failed with an error (a CEL runtime error, an incomplete
    /// pool for `allocationMode: All`): its FailedScheduling message is the error itself, not a
    /// "0/N nodes are available" summary, and contains each of `reasons`. sched-core must end with
    /// `Outcome::Error` and the same message, byte for byte.
    pub fn expect_error(&self, reasons: &[&str]) -> Result<()> {
        self.report();
        let Verdict::Failed(message) = &self.kube else {
            bail!(
                "{}: expected FailedScheduling, kube-scheduler: {:?}",
                self.scenario,
                self.kube
            );
        };
        ensure!(
            !message.starts_with("0/"),
            "{}: kube-scheduler's message {message:?} is an unschedulable summary, not an error",
            self.scenario
        );
        for reason in reasons {
            ensure!(
                message.contains(reason),
                "{}: kube-scheduler's message {message:?} lacks {reason:?} (the scenario does not \
                 exercise what it claims)",
                self.scenario
            );
        }
        ensure!(
            self.ours.outcome == Outcome::Error && &self.ours.message == message,
            "MISMATCH in {}:\n  kube-scheduler: {message:?} (an error)\n  sched-core:     {:?} ({:?})",
            self.scenario,
            self.ours.message,
            self.ours.outcome
        );
        Ok(())
    }

    /// The sched-core half of [`Self::expect_allocated`]: the same node, and the same devices
    /// for the claims of `fresh` (those kube-scheduler allocated in this trial).
    pub fn expect_devices(&self, kube: &[KubeAllocation], fresh: &[(&str, &[String])]) -> Result<()> {
        self.agrees()?;
        let Verdict::Bound(bound) = &self.kube else {
            bail!("{}: kube-scheduler bound nothing", self.scenario);
        };
        compare_allocations(self, bound, kube, fresh)
    }
}

/// sched-core's `claim_allocations` against kube-scheduler's, for the claims kube-scheduler
/// allocated in this trial (`fresh`: the pod claims of `expected`) on node `bound`.
pub fn compare_allocations(
    trial: &Trial,
    bound: &str,
    kube: &[KubeAllocation],
    fresh: &[(&str, &[String])],
) -> Result<()> {
    let ours = &trial.ours.claim_allocations;
    let named: Vec<&str> = kube
        .iter()
        .filter(|a| a.pod_claim != EXTENDED_RESOURCES)
        .map(|a| a.claim.as_str())
        .collect();
    for (pod_claim, _) in fresh {
        let Some(allocation) = kube.iter().find(|a| a.pod_claim == *pod_claim) else {
            continue;
        };
        // The extended-resource claim gets its name when kube-scheduler creates it: sched-core's
        // is the one entry that is none of the pod's own claims.
        let mine: Vec<&ClaimAllocation> = if *pod_claim == EXTENDED_RESOURCES {
            ours.iter()
                .filter(|c| !named.contains(&c.claim.as_str()))
                .collect()
        } else {
            ours.iter().filter(|c| c.claim == allocation.claim).collect()
        };
        let [mine] = mine.as_slice() else {
            bail!(
                "MISMATCH in {}: kube-scheduler allocated {} {:?}; sched-core's allocations: {ours:?}",
                trial.scenario,
                allocation.claim,
                device_names(&allocation.devices)
            );
        };
        ensure!(
            mine.node == bound && mine.devices == allocation.devices,
            "MISMATCH in {}: kube-scheduler allocated {} on {bound}: {:?}; sched-core on {}: {:?}",
            trial.scenario,
            allocation.claim,
            device_names(&allocation.devices),
            mine.node,
            device_names(&mine.devices)
        );
    }
    Ok(())
}

/// Deletes every ResourceClaim (finalizers dropped: kube-scheduler adds one when it allocates
/// and only kube-controller-manager would remove it), ResourceSlice and DeviceClass, and waits
/// until none is listed.
pub async fn clean_dra(client: &Client) -> Result<()> {
    let claims: Api<DynamicObject> = Api::all_with(client.clone(), &resource_claims());
    let listed = match claims.list(&ListParams::default()).await {
        // resource.k8s.io/v1 is not served (v1.33): nothing of it to delete.
        Err(e) if is_not_found(&e) => return Ok(()),
        other => other?,
    };
    for claim in listed.items {
        let (Some(ns), Some(name)) = (claim.metadata.namespace.clone(), claim.metadata.name.clone()) else {
            continue;
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource_claims());
        if claim.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
            match api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await
            {
                Err(e) if !is_not_found(&e) => {
                    return Err(e).context(format!("dropping the finalizers of claim {ns}/{name}"));
                }
                _ => {}
            }
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Err(e) if !is_not_found(&e) => {
                return Err(e).context(format!("deleting claim {ns}/{name}"));
            }
            _ => {}
        }
    }
    let slices: Api<DynamicObject> = Api::all_with(client.clone(), &resource_slices());
    slices
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    let classes: Api<DynamicObject> = Api::all_with(client.clone(), &device_classes());
    classes
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    // DeviceTaintRules are served only when their feature is on.
    let rules: Api<DynamicObject> = Api::all_with(client.clone(), &device_taint_rules());
    match rules
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
    {
        Err(e) if !is_not_found(&e) => return Err(e).context("deleting DeviceTaintRules"),
        _ => {}
    }
    eventually(
        "every claim, slice and class to be gone",
        SETUP_TIMEOUT,
        || async {
            let left = claims.list(&ListParams::default().limit(1)).await?.items.len()
                + slices.list(&ListParams::default().limit(1)).await?.items.len()
                + classes.list(&ListParams::default().limit(1)).await?.items.len();
            Ok((left == 0).then_some(()))
        },
    )
    .await?;
    Ok(())
}
