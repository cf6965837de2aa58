//! The Rust side of the DRA allocator differential test (`make dra-difftest`,
//! tests/dra-allocator-difftest/): runs sched-dra's structured allocator
//! ([`Allocator::allocate`]) on one generated case and prints its result as JSON, for comparison
//! with what upstream `k8s.io/dynamic-resource-allocation/structured` chooses for the same case.
//!
//! Input (a file argument, or stdin): `{"node": Node, "slices": [ResourceSlice], "classes":
//! [DeviceClass], "claims": [ResourceClaim], "allocatedClaims": [ResourceClaim]}`. Output, one
//! line: `{"results": [AllocationResult], "calls": N}` when every claim can be allocated,
//! `{"none": true, "calls": N}` when they cannot, `{"error": "...", "calls": N}` on an error;
//! `calls` is `NumAllocateOneInvocations`. Features are v1.37's defaults.
//!
//! Run: `cargo run --release -p sched-dra --example dra_allocate -- CASE.json`

use std::collections::HashMap;
use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use sched_dra::cel;
use sched_dra::structured::{AllocatedState, Allocator, Features, ResourceSlices};

/// How long one case may search before the allocator gives up with an error.
const DEADLINE: Duration = Duration::from_secs(120);

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Input {
    node: Node,
    #[serde(default)]
    slices: Vec<ResourceSlice>,
    #[serde(default)]
    classes: Vec<DeviceClass>,
    #[serde(default)]
    claims: Vec<ResourceClaim>,
    #[serde(default)]
    allocated_claims: Vec<ResourceClaim>,
}

fn main() -> ExitCode {
    let data = match std::env::args_os().nth(1) {
        Some(path) => std::fs::read(&path).map_err(|e| format!("{}: {e}", path.to_string_lossy())),
        None => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map(|_| buf)
                .map_err(|e| format!("stdin: {e}"))
        }
    };
    let input: Input = match data.and_then(|d| serde_json::from_slice(&d).map_err(|e| e.to_string())) {
        Ok(input) => input,
        Err(e) => {
            eprintln!("dra_allocate: {e}");
            return ExitCode::from(2);
        }
    };

    let allocated = AllocatedState::from_claims(&input.allocated_claims);
    let classes: HashMap<String, Arc<DeviceClass>> = input
        .classes
        .into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), Arc::new(c)))
        .collect();
    let slices = ResourceSlices::new(input.slices);
    let cache = cel::Cache::new(10);
    let allocator = Allocator::new(Features::V1_37_DEFAULTS, &allocated, &classes, &slices, &cache);
    let claims: Vec<&ResourceClaim> = input.claims.iter().collect();
    let mut out = match allocator.allocate(&input.node, &claims, Some(Instant::now() + DEADLINE)) {
        Ok(Some(results)) => serde_json::json!({ "results": results }),
        Ok(None) => serde_json::json!({ "none": true }),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    };
    out["calls"] = allocator.allocate_one_invocations().into();
    println!("{out}");
    ExitCode::SUCCESS
}
