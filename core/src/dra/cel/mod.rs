//! DRA's CEL environment: device selectors (`DeviceClass.spec.selectors[].cel.expression`,
//! `ResourceClaim.spec.devices.requests[].exactly.selectors[]`) compiled once and evaluated against
//! one device at a time, as `k8s.io/dynamic-resource-allocation/cel` does.
//!
//! CONTRACT (placeholder until the CEL work lands): the public API below is what the allocator and
//! the plugin use; the bodies are being written.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};

/// One device as a selector sees it (`cel.Device` upstream).
#[derive(Debug, Clone, Copy)]
pub struct Device<'a> {
    /// `device.driver`; also the default domain of unqualified attribute and capacity names.
    pub driver: &'a str,
    /// The device's attributes by (possibly domain-qualified) name.
    pub attributes: &'a BTreeMap<String, DeviceAttribute>,
    /// The device's capacities by (possibly domain-qualified) name.
    pub capacity: &'a BTreeMap<String, DeviceCapacity>,
    /// `device.allowMultipleAllocations` (false when unset).
    pub allow_multiple_allocations: Option<bool>,
}

/// Why a selector could not be compiled or evaluated. The `Display` text is what kube-scheduler's
/// error text carries after `CEL compile error: ` / `CEL runtime error: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The expression does not compile (syntax, unknown identifier, wrong result type).
    #[error("{0}")]
    Compile(String),
    /// Evaluation failed (no such key, type mismatch, overflow, cost limit exceeded).
    #[error("{0}")]
    Runtime(String),
}

/// A compiled selector (`cel.CompilationResult`): `error` is set when compilation failed.
#[derive(Debug)]
pub struct CompilationResult {
    /// The expression as written.
    pub expression: String,
    /// Why it did not compile, if it did not.
    pub error: Option<CelError>,
}

impl CompilationResult {
    /// Evaluates the selector against `device` (`DeviceMatches`).
    pub fn device_matches(&self, _device: &Device<'_>) -> Result<bool, CelError> {
        Err(CelError::Runtime("CEL evaluation is not implemented yet".into()))
    }
}

/// Compiled selectors by expression (`cel.Cache`), shared by every node's allocation.
#[derive(Debug, Default)]
pub struct Cache {}

impl Cache {
    /// A cache holding at most `max_entries` compiled expressions.
    pub fn new(_max_entries: usize) -> Self {
        Cache {}
    }

    /// The compiled form of `expression`, compiling it on first use (`GetOrCompile`).
    pub fn get_or_compile(&self, expression: &str) -> Arc<CompilationResult> {
        Arc::new(CompilationResult {
            expression: expression.to_string(),
            error: Some(CelError::Compile("CEL compilation is not implemented yet".into())),
        })
    }
}
