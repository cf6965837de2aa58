//! One request or subrequest, read the same way whichever it is (`requestAccessor`,
//! `exactDeviceRequestAccessor`, `deviceSubRequestAccessor`).

use k8s_openapi::api::resource::v1::{
    CapacityRequirements, DeviceRequest, DeviceSelector, DeviceSubRequest, DeviceToleration,
    ExactDeviceRequest,
};

/// `allocationMode` (the API server defaults it to ExactCount).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationMode<'a> {
    /// `ExactCount`: `count` devices.
    ExactCount,
    /// `All`: every matching device.
    All,
    /// Something this allocator does not know.
    Unknown(&'a str),
}

/// A request's `exactly`, or one of its `firstAvailable` subrequests.
#[derive(Debug, Clone, Copy)]
pub enum Req<'a> {
    /// A request without subrequests (`exactly` is missing only in requests the API server
    /// rejects; they read as having no device class).
    Exact {
        /// The request's name.
        name: &'a str,
        /// Its `exactly`.
        exact: Option<&'a ExactDeviceRequest>,
    },
    /// A subrequest.
    Sub(&'a DeviceSubRequest),
}

impl<'a> Req<'a> {
    /// The request's `exactly`.
    pub fn exact(request: &'a DeviceRequest) -> Self {
        Req::Exact {
            name: &request.name,
            exact: request.exactly.as_ref(),
        }
    }

    /// `name`: the request's or the subrequest's own name.
    pub fn name(&self) -> &'a str {
        match self {
            Req::Exact { name, .. } => name,
            Req::Sub(s) => &s.name,
        }
    }

    /// `deviceClassName`.
    pub fn device_class_name(&self) -> &'a str {
        match self {
            Req::Exact { exact, .. } => exact.map_or("", |e| e.device_class_name.as_str()),
            Req::Sub(s) => &s.device_class_name,
        }
    }

    /// `allocationMode` (unset is ExactCount, the API's default).
    pub fn allocation_mode(&self) -> AllocationMode<'a> {
        let mode = match self {
            Req::Exact { exact, .. } => exact.and_then(|e| e.allocation_mode.as_deref()),
            Req::Sub(s) => s.allocation_mode.as_deref(),
        };
        match mode {
            None | Some("ExactCount") => AllocationMode::ExactCount,
            Some("All") => AllocationMode::All,
            Some(other) => AllocationMode::Unknown(other),
        }
    }

    /// `count` (unset is 1, the API's default for ExactCount).
    pub fn count(&self) -> i64 {
        match self {
            Req::Exact { exact, .. } => exact.and_then(|e| e.count).unwrap_or(1),
            Req::Sub(s) => s.count.unwrap_or(1),
        }
    }

    /// `adminAccess` (subrequests never have it).
    pub fn admin_access(&self) -> bool {
        match self {
            Req::Exact { exact, .. } => exact.and_then(|e| e.admin_access) == Some(true),
            Req::Sub(_) => false,
        }
    }

    /// `hasAdminAccess`: `adminAccess` is set at all.
    pub fn has_admin_access(&self) -> bool {
        match self {
            Req::Exact { exact, .. } => exact.is_some_and(|e| e.admin_access.is_some()),
            Req::Sub(_) => false,
        }
    }

    /// `selectors`.
    pub fn selectors(&self) -> &'a [DeviceSelector] {
        match self {
            Req::Exact { exact, .. } => exact.and_then(|e| e.selectors.as_deref()).unwrap_or_default(),
            Req::Sub(s) => s.selectors.as_deref().unwrap_or_default(),
        }
    }

    /// `tolerations`.
    pub fn tolerations(&self) -> Option<&'a Vec<DeviceToleration>> {
        match self {
            Req::Exact { exact, .. } => exact.and_then(|e| e.tolerations.as_ref()),
            Req::Sub(s) => s.tolerations.as_ref(),
        }
    }

    /// `capacities`.
    pub fn capacities(&self) -> Option<&'a CapacityRequirements> {
        match self {
            Req::Exact { exact, .. } => exact.and_then(|e| e.capacity.as_ref()),
            Req::Sub(s) => s.capacity.as_ref(),
        }
    }

    /// Whether `derivedAttributes` are asked for (DRADerivedAttributes, off in v1.37).
    pub fn has_derived_attributes(&self) -> bool {
        match self {
            Req::Exact { exact, .. } => exact
                .and_then(|e| e.derived_attributes.as_ref())
                .is_some_and(|d| !d.is_empty()),
            Req::Sub(s) => s.derived_attributes.as_ref().is_some_and(|d| !d.is_empty()),
        }
    }
}
