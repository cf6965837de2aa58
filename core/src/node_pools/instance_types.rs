//! The instance types a pool can launch, as Karpenter's cloud provider describes them: a name, the
//! labels the type defines (as [`Requirements`]), its capacity, the kubelet's reservation, and the
//! offerings (zone × capacity type, with a price) it is sold in. The cloud catalogue is not in the
//! cluster: the types come from a file in the format of Karpenter's KWOK provider
//! (`kwok/cloudprovider/instance_types.json`), which is what the differential tests launch with.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use super::requirements::{CAPACITY_TYPE_LABEL, Requirement, RequirementError, Requirements};
use super::resources::ResourceAmounts;
use crate::resource::{CPU, MEMORY, PODS};

/// `karpenter.kwok.sh/instance-size`.
const INSTANCE_SIZE_LABEL: &str = "karpenter.kwok.sh/instance-size";
/// `karpenter.kwok.sh/instance-family`.
const INSTANCE_FAMILY_LABEL: &str = "karpenter.kwok.sh/instance-family";
/// `karpenter.kwok.sh/instance-cpu`.
const INSTANCE_CPU_LABEL: &str = "karpenter.kwok.sh/instance-cpu";
/// `karpenter.kwok.sh/instance-memory`.
const INSTANCE_MEMORY_LABEL: &str = "karpenter.kwok.sh/instance-memory";
/// The pods a node holds when the type does not say (the kubelet's default).
const DEFAULT_PODS: i64 = 110;

/// What an instance-types file cannot be read as.
#[derive(Debug, thiserror::Error)]
pub enum InstanceTypeError {
    /// Not a JSON list of instance types.
    #[error("instance types: {0}")]
    Json(#[from] serde_json::Error),
    /// An offering's requirement cannot be built.
    #[error("instance type {name}: {source}")]
    Requirement {
        /// The instance type.
        name: String,
        /// Why.
        source: RequirementError,
    },
}

/// One way an instance type is sold.
#[derive(Debug, Clone, PartialEq)]
pub struct Offering {
    /// Its zone and capacity type, as requirements.
    pub requirements: Requirements,
    /// The hourly price.
    pub price: f64,
    /// Whether it can be launched now.
    pub available: bool,
}

/// An instance type (`cloudprovider.InstanceType`).
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceType {
    /// Its name, the value of `node.kubernetes.io/instance-type`.
    pub name: String,
    /// The labels it defines.
    pub requirements: Requirements,
    /// The offerings.
    pub offerings: Vec<Offering>,
    /// Capacity, in kube-scheduler's units (milli-cpu, bytes, counts).
    pub capacity: ResourceAmounts,
    /// What the kubelet reserves: capacity minus this is allocatable.
    pub overhead: ResourceAmounts,
}

impl InstanceType {
    /// What pods may request on a node of this type.
    pub fn allocatable(&self) -> ResourceAmounts {
        self.capacity.minus(&self.overhead)
    }

    /// The cheapest available offering `requirements` allow, if any.
    pub fn cheapest_offering(&self, requirements: &Requirements) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available && requirements.compatible(&o.requirements).is_ok())
            .min_by(|a, b| a.price.total_cmp(&b.price))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInstanceType {
    name: String,
    #[serde(default)]
    offerings: Vec<RawOffering>,
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    operating_systems: Vec<String>,
    #[serde(default)]
    resources: BTreeMap<String, Quantity>,
}

/// Go's encoding/json matches field names without regard to case: the provider's own file writes
/// `Price`, `Available`, `Requirements`.
#[derive(Deserialize)]
struct RawOffering {
    #[serde(default, alias = "Price")]
    price: f64,
    #[serde(default, alias = "Requirements")]
    requirements: Vec<NodeSelectorRequirement>,
}

/// Reads a KWOK instance-types file (a JSON list), as the provider's `ConstructInstanceTypes` does:
/// every offering available, 110 pods unless the type says otherwise, 100m cpu and 10Mi memory
/// reserved, and the kwok size/family/cpu/memory labels.
pub fn parse_instance_types(json: &str) -> Result<Vec<InstanceType>, InstanceTypeError> {
    let raw: Vec<RawInstanceType> = serde_json::from_str(json)?;
    raw.into_iter().map(instance_type).collect()
}

fn instance_type(raw: RawInstanceType) -> Result<InstanceType, InstanceTypeError> {
    let wrap = |source| InstanceTypeError::Requirement {
        name: raw.name.clone(),
        source,
    };
    let mut offerings = Vec::new();
    let (mut zones, mut capacity_types) = (Vec::new(), Vec::new());
    for offering in &raw.offerings {
        let requirements = Requirements::from_node_selector(&offering.requirements).map_err(wrap)?;
        for (key, into) in [
            ("topology.kubernetes.io/zone", &mut zones),
            (CAPACITY_TYPE_LABEL, &mut capacity_types),
        ] {
            for value in offering
                .requirements
                .iter()
                .filter(|r| r.key == key)
                .flat_map(|r| r.values.iter().flatten())
            {
                if !into.contains(value) {
                    into.push(value.clone());
                }
            }
        }
        offerings.push(Offering {
            requirements,
            price: offering.price,
            available: true,
        });
    }
    let cpu = raw.resources.get(CPU).map(|q| q.0.clone()).unwrap_or_default();
    let memory = raw.resources.get(MEMORY).map(|q| q.0.clone()).unwrap_or_default();
    let mut capacity = ResourceAmounts::from_list(&raw.resources);
    if capacity.get(PODS) == 0 {
        capacity.set(PODS, DEFAULT_PODS);
    }
    let labels = [
        ("node.kubernetes.io/instance-type", vec![raw.name.clone()]),
        ("kubernetes.io/arch", vec![raw.architecture.clone()]),
        ("kubernetes.io/os", raw.operating_systems.clone()),
        ("topology.kubernetes.io/zone", zones),
        (CAPACITY_TYPE_LABEL, capacity_types),
        (INSTANCE_SIZE_LABEL, vec![instance_size(&raw.name, &cpu)]),
        (INSTANCE_FAMILY_LABEL, vec![instance_family(&raw.name)]),
        (INSTANCE_CPU_LABEL, vec![cpu]),
        (INSTANCE_MEMORY_LABEL, vec![memory]),
    ];
    let mut requirements = Requirements::new();
    for (key, values) in labels {
        requirements.add(Requirement::new(key, "In", &values, None).map_err(wrap)?);
    }
    let mut overhead = ResourceAmounts::default();
    overhead.set(CPU, 100);
    overhead.set(MEMORY, 10 << 20);
    Ok(InstanceType {
        name: raw.name,
        requirements,
        offerings,
        capacity,
        overhead,
    })
}

/// `parseSizeFromType`: the size of an AWS-style name (`m5.xlarge` → `xlarge`), else the cpu count.
fn instance_size(name: &str, cpu: &str) -> String {
    const SIZES: &[&str] = &["nano", "micro", "small", "medium", "large", "metal"];
    if let Some((family, size)) = name.split_once('.')
        && !family.is_empty()
        && family.chars().all(|c| c.is_alphanumeric() || c == '_')
        && (SIZES.contains(&size)
            || size
                .strip_suffix("xlarge")
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit())))
    {
        return size.to_owned();
    }
    cpu.to_owned()
}

/// `parseFamilyFromType`: the name up to its first `.` or `-`, else its first letter.
fn instance_family(name: &str) -> String {
    match name.split_once(['.', '-']) {
        Some((family, _)) => family.to_owned(),
        None => name.chars().take(1).collect(),
    }
}

/// Three KWOK-style types, the bundled example's (`examples/instance-types.json`, which the e2e
/// `node_pools` suite launches Karpenter with too): 4 and 16 cpus (amd64/linux, on-demand in zone a,
/// the small one also spot in zone b), and an arm64 `m5.2xlarge` with no offering.
#[cfg(test)]
pub(crate) const TEST_INSTANCE_TYPES: &str = include_str!("../../../examples/instance-types.json");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kwok_file_reads_as_the_provider_builds_it() {
        let types = parse_instance_types(TEST_INSTANCE_TYPES).expect("valid file");
        let c4 = &types[0];
        assert_eq!(
            c4.requirements.to_string(),
            "karpenter.kwok.sh/instance-cpu In [4], karpenter.kwok.sh/instance-family In [c], \
             karpenter.kwok.sh/instance-memory In [16Gi], karpenter.kwok.sh/instance-size In [4], \
             karpenter.sh/capacity-type In [on-demand spot], kubernetes.io/arch In [amd64], \
             kubernetes.io/os In [linux], node.kubernetes.io/instance-type In [c-4x-amd64-linux], \
             topology.kubernetes.io/zone In [test-zone-a test-zone-b]"
        );
        assert_eq!(c4.allocatable().get(CPU), 3900);
        assert_eq!(c4.allocatable().get(MEMORY), (16 << 30) - (10 << 20));
        assert_eq!(c4.capacity.get(PODS), 110);
        assert_eq!(types[2].capacity.get(PODS), 58);
        assert_eq!(
            types[2].requirements.get(INSTANCE_SIZE_LABEL).to_string(),
            "karpenter.kwok.sh/instance-size In [2xlarge]"
        );
        assert_eq!(
            types[2].requirements.get(INSTANCE_FAMILY_LABEL).to_string(),
            "karpenter.kwok.sh/instance-family In [m5]"
        );
    }

    #[test]
    fn cheapest_offering_respects_the_requirements() {
        let types = parse_instance_types(TEST_INSTANCE_TYPES).expect("valid file");
        let any = Requirements::new();
        assert_eq!(types[0].cheapest_offering(&any).map(|o| o.price), Some(0.1));
        let on_demand =
            Requirements::from_labels([(&CAPACITY_TYPE_LABEL.to_owned(), &"on-demand".to_owned())]);
        assert_eq!(types[0].cheapest_offering(&on_demand).map(|o| o.price), Some(0.2));
    }

    #[test]
    fn a_broken_file_is_an_error() {
        assert!(parse_instance_types("{").is_err());
        assert!(parse_instance_types(r#"[{"name": "x", "offerings": [{"Requirements": [{"key": "k", "operator": "Gt", "values": ["a"]}]}]}]"#).is_err());
    }
}
