//! Karpenter's NodePools (`karpenter.sh/v1`) as a snapshot holds them. A NodePool is a custom
//! resource, so k8s-openapi has no type for it: this one keeps what every kind of the table keeps
//! (metadata), and the spec and status as the API server sent them, for
//! [`node_pools::NodePool`](crate::node_pools::NodePool) to read. Keeping them whole, rather than
//! decoded, means a NodePool that the engine cannot read (a newer field, a bad requirement) still
//! loads, is dumped back unchanged, and is reported where it is used instead of failing the load.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// A NodePool: its metadata, and its spec and status as JSON.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct NodePoolObject {
    /// Its metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` (template, limits, weight, disruption), as sent.
    #[serde(default)]
    pub spec: Value,
    /// `status` (the resources its nodes use, conditions), as sent.
    #[serde(default)]
    pub status: Value,
}

impl NodePoolObject {
    /// The pool's name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The object as JSON, apiVersion and kind included (what [`NodePool::from_json`] reads).
    ///
    /// [`NodePool::from_json`]: crate::node_pools::NodePool::from_json
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Written as the API server writes it: apiVersion and kind first, and no empty spec or status.
impl Serialize for NodePoolObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("apiVersion", <Self as k8s_openapi::Resource>::API_VERSION)?;
        map.serialize_entry("kind", <Self as k8s_openapi::Resource>::KIND)?;
        map.serialize_entry("metadata", &self.metadata)?;
        if !self.spec.is_null() {
            map.serialize_entry("spec", &self.spec)?;
        }
        if !self.status.is_null() {
            map.serialize_entry("status", &self.status)?;
        }
        map.end()
    }
}

impl k8s_openapi::Resource for NodePoolObject {
    const API_VERSION: &'static str = "karpenter.sh/v1";
    const GROUP: &'static str = "karpenter.sh";
    const KIND: &'static str = "NodePool";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "nodepools";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::ListableResource for NodePoolObject {
    const LIST_KIND: &'static str = "NodePoolList";
}

impl k8s_openapi::Metadata for NodePoolObject {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn round_trips_with_its_api_version_and_kind() {
        let object = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "general"},
            "spec": {"weight": 10, "template": {"spec": {"requirements": []}}},
            "status": {"resources": {"cpu": "4"}},
        });
        let pool: NodePoolObject = serde_json::from_value(object.clone()).expect("a NodePool");
        assert_eq!(pool.name(), "general");
        assert_eq!(pool.to_json(), object);
        let bare = NodePoolObject::default();
        assert_eq!(
            bare.to_json(),
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {}})
        );
    }
}
