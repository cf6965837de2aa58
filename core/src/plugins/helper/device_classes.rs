//! Which DeviceClass backs an extended resource (`fwk.DeviceClassResolver`, kube-scheduler's
//! `ExtendedResourceCache`): DynamicResources allocates devices for such a resource, and
//! NodeResourcesFit leaves it to DynamicResources. Both read it, so it sits below both.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::DeviceClass;

use crate::resource::is_extended_resource_name;
use crate::snapshot::Snapshot;

/// `resourceapi.ResourceDeviceClassPrefix`: every class's implicit extended resource name is this
/// prefix followed by the class name.
pub(crate) const RESOURCE_DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
/// `schedutil.IsDRAExtendedResourceName`: an extended resource name, or a class's implicit name
/// (which lies in the `kubernetes.io` domain and so is not an extended resource name by itself).
pub(crate) fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(RESOURCE_DEVICE_CLASS_PREFIX)
}

/// Which DeviceClass backs an extended resource name (`fwk.DeviceClassResolver`, kube-scheduler's
/// `ExtendedResourceCache`). Built once per snapshot by each plugin that needs it.
#[derive(Debug, Clone, Default)]
pub struct DeviceClassResolver {
    by_resource: HashMap<String, Arc<DeviceClass>>,
}

impl DeviceClassResolver {
    /// Indexes `classes` by their explicit and implicit extended resource names.
    ///
    /// When several classes name the same `spec.extendedResourceName`, the most recently created one
    /// wins and equal timestamps go to the lower name (kube-scheduler prefers the newer class so a
    /// migration from one class to another works). The informer-driven cache can end up elsewhere
    /// depending on event order (a class losing the clash on arrival does not even get its implicit
    /// name there); a snapshot has no event order, so the rule is applied to the final set.
    /// Implicit names are unique and validation keeps them out of `extendedResourceName`.
    pub fn new<'a>(classes: impl IntoIterator<Item = &'a Arc<DeviceClass>>) -> Self {
        let mut explicit: HashMap<String, Arc<DeviceClass>> = HashMap::new();
        let mut implicit = Vec::new();
        for class in classes {
            let name = class.metadata.name.as_deref().unwrap_or("");
            implicit.push((format!("{RESOURCE_DEVICE_CLASS_PREFIX}{name}"), class.clone()));
            let Some(resource) = class
                .spec
                .as_ref()
                .and_then(|s| s.extended_resource_name.as_deref())
            else {
                continue;
            };
            let wins = match explicit.get(resource) {
                None => true,
                Some(current) => {
                    let created = |c: &DeviceClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
                    match created(class).cmp(&created(current)) {
                        std::cmp::Ordering::Greater => true,
                        std::cmp::Ordering::Less => false,
                        std::cmp::Ordering::Equal => name < current.metadata.name.as_deref().unwrap_or(""),
                    }
                }
            };
            if wins {
                explicit.insert(resource.to_string(), class.clone());
            }
        }
        let mut by_resource = explicit;
        by_resource.extend(implicit);
        DeviceClassResolver { by_resource }
    }

    /// The resolver of a snapshot's DeviceClasses.
    pub fn for_snapshot(snapshot: &Snapshot) -> Self {
        Self::new(snapshot.device_classes.values())
    }

    /// `GetDeviceClass`: the class backing `resource`, if any.
    pub fn get_device_class(&self, resource: &str) -> Option<&Arc<DeviceClass>> {
        self.by_resource.get(resource)
    }

    /// True when no class exists (then no extended resource is backed by DRA).
    pub fn is_empty(&self) -> bool {
        self.by_resource.is_empty()
    }
}
