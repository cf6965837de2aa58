//! What the API server does to a new pod before kube-scheduler first sees it, as far as scheduling
//! reads it: the defaulting of the pod's fields and two default admission plugins, Priority and
//! DefaultTolerationSeconds. Pure: a pod read from a file (not from the API server) is made to look as
//! the API server would have stored it.

use k8s_openapi::api::core::v1::{Pod, PodSpec, Toleration};
use k8s_openapi::api::scheduling::v1::PriorityClass;

/// `spec.schedulerName` when a pod names none (the API server's defaulting), and the name of the
/// profile a configuration without profiles gets.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
/// `system-cluster-critical`'s value (a priority class every cluster has).
pub const SYSTEM_CLUSTER_CRITICAL: i32 = 2_000_000_000;
/// `system-node-critical`'s value (a priority class every cluster has).
pub const SYSTEM_NODE_CRITICAL: i32 = 2_000_001_000;
/// The taints DefaultTolerationSeconds adds a toleration for.
pub const DEFAULT_TOLERATION_KEYS: [&str; 2] =
    ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"];
/// How long those tolerations tolerate the taint, in seconds.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// Why the API server would refuse the pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmitError {
    /// The pod has no spec.
    #[error("the Pod has no spec")]
    NoSpec,
    /// `spec.priorityClassName` names no PriorityClass (the Priority admission plugin refuses it).
    #[error("no PriorityClass with name {0} was found")]
    UnknownPriorityClass(String),
}

/// Applies the parts of API defaulting and admission that change scheduling: [`apply_defaults`], the
/// Priority admission plugin ([`admit_priority`]) and DefaultTolerationSeconds
/// ([`add_default_tolerations`]). `priority_classes` are the cluster's.
pub fn admit(pod: &mut Pod, priority_classes: &[PriorityClass]) -> Result<(), AdmitError> {
    let spec = pod.spec.as_mut().ok_or(AdmitError::NoSpec)?;
    apply_defaults(spec);
    admit_priority(spec, priority_classes)?;
    add_default_tolerations(spec);
    Ok(())
}

/// API defaulting: requests default to limits (containers, init containers and pod-level resources),
/// a host-network pod's container ports are host ports, and an empty schedulerName is
/// `default-scheduler`.
pub fn apply_defaults(spec: &mut PodSpec) {
    let host_network = spec.host_network.unwrap_or(false);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        if let Some(resources) = c.resources.as_mut()
            && let Some(limits) = resources.limits.clone()
        {
            let requests = resources.requests.get_or_insert_with(Default::default);
            for (name, q) in limits {
                requests.entry(name).or_insert(q);
            }
        }
        if host_network {
            for port in c.ports.iter_mut().flatten() {
                if port.host_port.unwrap_or(0) == 0 {
                    port.host_port = Some(port.container_port);
                }
            }
        }
    }
    if let Some(resources) = spec.resources.as_mut()
        && let Some(limits) = resources.limits.clone()
    {
        let requests = resources.requests.get_or_insert_with(Default::default);
        for (name, q) in limits {
            requests.entry(name).or_insert(q);
        }
    }
    if spec.scheduler_name.as_deref().unwrap_or("").is_empty() {
        spec.scheduler_name = Some(DEFAULT_SCHEDULER_NAME.to_string());
    }
}

/// What the Priority admission plugin computes for a new pod: the class it ends up with (the global
/// default class's name when the pod named none), the priority and the class's preemption policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EstablishedPriority {
    /// The named class, or the global default class; `None` when the pod named none and there is no
    /// global default.
    pub class_name: Option<String>,
    /// The class's value (0 without a class).
    pub priority: i32,
    /// The class's `preemptionPolicy`, when it sets one (the two built-in classes do not here).
    pub preemption_policy: Option<String>,
}

/// The Priority admission plugin's `establishPriority`: the named class (the two built-in
/// `system-*-critical` classes exist even when `priority_classes` omits them), else the global default
/// class (the lowest-valued one when several claim it, as upstream picks after a race), else priority
/// 0. A named class that does not exist is refused, as the API server refuses the pod.
pub fn establish_priority(
    class_name: Option<&str>,
    priority_classes: &[PriorityClass],
) -> Result<EstablishedPriority, AdmitError> {
    let of = |pc: &PriorityClass| EstablishedPriority {
        class_name: pc.metadata.name.clone(),
        priority: pc.value.unwrap_or(0),
        preemption_policy: pc.preemption_policy.clone(),
    };
    match class_name.filter(|c| !c.is_empty()) {
        Some(name) => match priority_classes
            .iter()
            .find(|pc| pc.metadata.name.as_deref() == Some(name))
        {
            Some(pc) => Ok(of(pc)),
            None => builtin_priority(name)
                .map(|priority| EstablishedPriority {
                    class_name: Some(name.to_string()),
                    priority,
                    preemption_policy: None,
                })
                .ok_or_else(|| AdmitError::UnknownPriorityClass(name.to_string())),
        },
        None => Ok(priority_classes
            .iter()
            .filter(|pc| pc.global_default == Some(true))
            .min_by_key(|pc| pc.value.unwrap_or(0))
            .map_or(
                EstablishedPriority {
                    class_name: None,
                    priority: 0,
                    preemption_policy: None,
                },
                of,
            )),
    }
}

/// The Priority admission plugin for a pod read from a file: a pod without `spec.priority` gets what
/// [`establish_priority`] computes (priority, the global default class's name when it named none, and
/// the class's preemption policy unless it sets one); a class that does not exist is refused. A pod
/// that has `spec.priority` was admitted already (a stored pod, or `kubectl get -o yaml`'s output) and
/// is kept as it is, as kube-scheduler reads only `spec.priority`.
pub fn admit_priority(spec: &mut PodSpec, priority_classes: &[PriorityClass]) -> Result<(), AdmitError> {
    if spec.priority.is_some() {
        return Ok(());
    }
    let established = establish_priority(spec.priority_class_name.as_deref(), priority_classes)?;
    spec.priority = Some(established.priority);
    if established.class_name.is_some() {
        spec.priority_class_name = established.class_name;
    }
    if spec.preemption_policy.is_none() {
        spec.preemption_policy = established.preemption_policy;
    }
    Ok(())
}

/// DefaultTolerationSeconds: tolerations of the not-ready and unreachable NoExecute taints for 300 s,
/// unless the pod already tolerates them.
pub fn add_default_tolerations(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in DEFAULT_TOLERATION_KEYS {
        let covered = tolerations.iter().any(|t| {
            let effect = t.effect.as_deref().unwrap_or("");
            (effect.is_empty() || effect == "NoExecute")
                && (t.key.as_deref() == Some(key)
                    || (t.key.is_none() && t.operator.as_deref() == Some("Exists")))
        });
        if !covered {
            tolerations.push(Toleration {
                key: Some(key.to_string()),
                operator: Some("Exists".to_string()),
                effect: Some("NoExecute".to_string()),
                toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
                value: None,
            });
        }
    }
}

/// The two priority classes every cluster has even when a snapshot omits them.
pub fn builtin_priority(name: &str) -> Option<i32> {
    match name {
        "system-cluster-critical" => Some(SYSTEM_CLUSTER_CRITICAL),
        "system-node-critical" => Some(SYSTEM_NODE_CRITICAL),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod_with(spec: PodSpec) -> Pod {
        Pod {
            spec: Some(spec),
            ..Pod::default()
        }
    }

    fn class(name: &str, value: i32, global_default: bool) -> PriorityClass {
        PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            value: Some(value),
            global_default: Some(global_default),
            ..PriorityClass::default()
        }
    }

    #[test]
    fn admission_defaults_requests_priority_and_tolerations() {
        let limits = BTreeMap::from([("cpu".to_string(), Quantity("2".into()))]);
        let mut pod = pod_with(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    limits: Some(limits),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            priority_class_name: Some("system-node-critical".into()),
            ..Default::default()
        });
        admit(&mut pod, &[]).unwrap();
        let spec = pod.spec.unwrap();
        let requests = spec.containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap();
        assert_eq!(requests.get("cpu"), Some(&Quantity("2".into())));
        assert_eq!(spec.priority, Some(2_000_001_000));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        let keys: Vec<_> = spec
            .tolerations
            .unwrap()
            .iter()
            .map(|t| t.key.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            keys,
            ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
        );
    }

    #[test]
    fn unknown_priority_class_is_refused_like_the_api_server() {
        let mut pod = pod_with(PodSpec {
            priority_class_name: Some("gold".into()),
            ..Default::default()
        });
        let err = admit(&mut pod, &[]).unwrap_err();
        assert_eq!(err, AdmitError::UnknownPriorityClass("gold".into()));
        assert_eq!(err.to_string(), "no PriorityClass with name gold was found");
        assert_eq!(admit(&mut Pod::default(), &[]), Err(AdmitError::NoSpec));
    }

    #[test]
    fn priority_comes_from_the_named_class_the_global_default_or_is_kept() {
        let classes = [class("gold", 1000, false), class("normal", 5, true)];
        let cases = [
            ("named", Some("gold"), None, Some(1000)),
            ("global default", None, None, Some(5)),
            ("set already", Some("gold"), Some(7), Some(7)),
            (
                "builtin",
                Some("system-cluster-critical"),
                None,
                Some(2_000_000_000),
            ),
        ];
        for (case, name, priority, want) in cases {
            let mut spec = PodSpec {
                priority_class_name: name.map(str::to_string),
                priority,
                ..PodSpec::default()
            };
            admit_priority(&mut spec, &classes).unwrap();
            assert_eq!(spec.priority, want, "{case}");
        }
        let mut spec = PodSpec::default();
        admit_priority(&mut spec, &[]).unwrap();
        assert_eq!(spec.priority, Some(0), "no class at all");
    }

    #[test]
    fn host_network_ports_are_host_ports_and_existing_tolerations_are_kept() {
        let mut spec = PodSpec {
            host_network: Some(true),
            scheduler_name: Some("mine".into()),
            containers: vec![Container {
                name: "c".into(),
                ports: Some(vec![ContainerPort {
                    container_port: 8080,
                    ..ContainerPort::default()
                }]),
                ..Default::default()
            }],
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".into()),
                ..Toleration::default()
            }]),
            ..PodSpec::default()
        };
        apply_defaults(&mut spec);
        add_default_tolerations(&mut spec);
        assert_eq!(
            spec.containers[0].ports.as_ref().unwrap()[0].host_port,
            Some(8080)
        );
        assert_eq!(spec.scheduler_name.as_deref(), Some("mine"));
        assert_eq!(
            spec.tolerations.unwrap().len(),
            1,
            "tolerating everything covers both"
        );
    }
}
