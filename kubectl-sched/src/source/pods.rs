//! The pod a command is about and the profile it is evaluated with, for `explain` and `preempt`: the
//! named pod taken out of the loaded objects (or `-f`'s, admitted as the API server would), a bound pod
//! unbound to be evaluated as if pending, and the profile of `--profile` or its schedulerName
//! ([`subject`] does all of it).

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use sched_core::admission::admit;
use sched_core::engine::{EngineError, ProfileError, ResolvedProfile, UnknownProfile};
use sched_core::snapshot::is_terminal;
use sched_core::snapshot::load::check_pod;
use sched_core::{ClusterObjects, Engine, PodInfo, Snapshot};

/// Why the pod or its profile could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// `--config` could not be loaded.
    #[error("scheduler configuration {0}")]
    Config(#[from] ProfileError),
    /// No pod given (clap requires one unless `-f` or `--all-pending`).
    #[error("no pod given")]
    NoPod,
    /// No such pod.
    #[error("pod \"{name}\" not found in namespace \"{namespace}\" ({origin})")]
    PodNotFound {
        /// The namespace looked in.
        namespace: String,
        /// The pod name.
        name: String,
        /// The file or API server.
        origin: String,
    },
    /// The pod has finished: kube-scheduler never looks at it.
    #[error("pod {key} has phase {phase}: kube-scheduler does not schedule finished pods")]
    TerminalPod {
        /// `namespace/name`.
        key: String,
        /// Succeeded or Failed.
        phase: String,
    },
    /// `-f` does not hold exactly one pod, or the pod cannot be admitted.
    #[error("{path}: {message}")]
    PodFile {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The pod's schedulerName names no profile of the configuration: kube-scheduler (run with it)
    /// ignores the pod, leaving it to the scheduler of that name.
    #[error(
        "pod {pod}: {source}: kube-scheduler with this configuration ignores the pod (another scheduler's); \
         use --config with that scheduler's configuration, or --profile"
    )]
    NotThisScheduler {
        /// `namespace/name`.
        pod: String,
        /// The scheduler name and the profiles there are.
        #[source]
        source: UnknownProfile,
    },
    /// `--profile` names no profile of the configuration.
    #[error("--profile: {0}")]
    NoSuchProfile(#[source] UnknownProfile),
    /// The profile's plugins could not be built.
    #[error(transparent)]
    Framework(#[from] EngineError),
}

/// `pod/NAME`, `pods/NAME` and `po/NAME` name a pod as kubectl accepts them.
pub(crate) fn pod_name(arg: &str) -> &str {
    for prefix in ["pod/", "pods/", "po/"] {
        if let Some(rest) = arg.strip_prefix(prefix) {
            return rest;
        }
    }
    arg
}

/// Takes the named pod out of the objects. A pod of that name already reduced to its scheduling
/// facts (a compact load) is dropped too, so a pod from `-f` replaces it; it is returned only when
/// whole.
pub(crate) fn take_pod(objects: &mut ClusterObjects, namespace: &str, name: &str) -> Option<Pod> {
    objects
        .placed_pods
        .retain(|p| !(p.namespace() == namespace && p.name() == name));
    let idx = objects.pods.iter().position(|p| {
        p.metadata.namespace.as_deref().unwrap_or("default") == namespace
            && p.metadata.name.as_deref() == Some(name)
    })?;
    Some(objects.pods.remove(idx))
}

/// The pod a command is about: `-f`'s (replacing one of the same name, as if it were created instead),
/// else the one named `pod` in `namespace`, taken out of `objects`. A finished named pod is refused:
/// kube-scheduler never looks at it.
pub(crate) fn resolve_pod(
    objects: &mut ClusterObjects,
    filename: Option<&Path>,
    pod: Option<&str>,
    namespace: &str,
    origin: &str,
) -> Result<Pod, ResolveError> {
    match (filename, pod) {
        (Some(path), _) => {
            let pod = read_pod_file(path, namespace, objects)?;
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            take_pod(objects, &ns, &name);
            Ok(pod)
        }
        (None, Some(arg)) => {
            let name = pod_name(arg);
            let pod = take_pod(objects, namespace, name).ok_or_else(|| ResolveError::PodNotFound {
                namespace: namespace.to_string(),
                name: name.to_string(),
                origin: origin.to_string(),
            })?;
            if is_terminal(&pod) {
                return Err(ResolveError::TerminalPod {
                    key: format!("{namespace}/{name}"),
                    phase: pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_default(),
                });
            }
            Ok(pod)
        }
        (None, None) => Err(ResolveError::NoPod),
    }
}

/// A bound pod is evaluated as if it were pending: off its node, not yet nominated anywhere. Returns
/// the node it was bound to.
pub(crate) fn unbind(pod: &mut Pod) -> Option<String> {
    let node = pod
        .spec
        .as_mut()
        .and_then(|s| s.node_name.take())
        .filter(|n| !n.is_empty());
    if node.is_some()
        && let Some(status) = pod.status.as_mut()
    {
        status.nominated_node_name = None;
    }
    node
}

/// The profile `--profile` names, else the one of the pod's schedulerName (an empty one is
/// default-scheduler's).
pub(crate) fn profile_for<'e>(
    engine: &'e Engine,
    pod: &PodInfo,
    flag: Option<&str>,
) -> Result<&'e ResolvedProfile, ResolveError> {
    match flag {
        Some(name) => engine.profile(name).map_err(ResolveError::NoSuchProfile),
        None => engine
            .profile_for(&pod.pod)
            .map_err(|source| ResolveError::NotThisScheduler {
                pod: pod.key(),
                source,
            }),
    }
}

/// The pod a command evaluates, with the cluster it is evaluated in and its profile.
pub(crate) struct Subject<'e> {
    /// The pod, as if pending when it was bound.
    pub(crate) pod: PodInfo,
    /// The node it is bound to.
    pub(crate) bound_node: Option<String>,
    /// The cluster without the pod.
    pub(crate) snapshot: Arc<Snapshot>,
    /// `--profile`'s profile, else its schedulerName's.
    pub(crate) profile: &'e ResolvedProfile,
}

/// The preamble `explain` and `preempt` share: resolves the pod ([`resolve_pod`]), unbinds a bound
/// one ([`unbind`]), builds the snapshot of the rest and resolves the profile ([`profile_for`]).
pub(crate) fn subject<'e>(
    engine: &'e Engine,
    objects: ClusterObjects,
    filename: Option<&Path>,
    pod: Option<&str>,
    profile: Option<&str>,
    namespace: &str,
    origin: &str,
) -> Result<Subject<'e>, ResolveError> {
    subject_with(
        engine,
        objects,
        filename,
        pod,
        profile,
        namespace,
        origin,
        |_, _| Ok(()),
    )
}

/// [`subject`], with `edit` changing the pod (already unbound) and the rest of the cluster before the
/// snapshot is built and the profile resolved (what-if flags: a changed schedulerName picks another
/// profile).
#[allow(clippy::too_many_arguments)] // subject's arguments plus the edit; a struct would only rename them
pub(crate) fn subject_with<'e, E: From<ResolveError>>(
    engine: &'e Engine,
    mut objects: ClusterObjects,
    filename: Option<&Path>,
    pod: Option<&str>,
    profile: Option<&str>,
    namespace: &str,
    origin: &str,
    edit: impl FnOnce(&mut Pod, &mut ClusterObjects) -> Result<(), E>,
) -> Result<Subject<'e>, E> {
    let mut pod = resolve_pod(&mut objects, filename, pod, namespace, origin)?;
    let bound_node = unbind(&mut pod);
    edit(&mut pod, &mut objects)?;
    let snapshot = Arc::new(engine.snapshot(objects));
    let pod = engine.pod_info(pod);
    let profile = profile_for(engine, &pod, profile)?;
    Ok(Subject {
        pod,
        bound_node,
        snapshot,
        profile,
    })
}

/// The text of a `-f` file, `-` reading stdin as kubectl does, with the name to show for it
/// (`<stdin>`); on failure the name and the reason.
pub(crate) fn read_file_or_stdin(path: &Path) -> Result<(String, String), (String, String)> {
    let shown = if path == Path::new("-") {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    };
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin().lock())
    } else {
        std::fs::read_to_string(path)
    };
    match text {
        Ok(text) => Ok((shown, text)),
        Err(e) => Err((shown, e.to_string())),
    }
}

/// Reads `-f`'s pod and applies what the API server's defaulting and default admission plugins
/// would before kube-scheduler sees it.
pub(crate) fn read_pod_file(
    path: &Path,
    namespace: &str,
    objects: &ClusterObjects,
) -> Result<Pod, ResolveError> {
    let (shown, text) =
        read_file_or_stdin(path).map_err(|(path, message)| ResolveError::PodFile { path, message })?;
    let invalid = |message: String| ResolveError::PodFile {
        path: shown.clone(),
        message,
    };
    let mut pods = parse_pods(&text).map_err(invalid)?;
    if pods.len() != 1 {
        return Err(invalid(format!("expected exactly one Pod, found {}", pods.len())));
    }
    // Not pruned like snapshot objects: limits still matter here, requests default to them below.
    let mut pod = pods.remove(0);
    if pod.metadata.name.as_deref().unwrap_or("").is_empty() {
        let generated = pod
            .metadata
            .generate_name
            .as_deref()
            .map(|g| format!("{g}xxxxx"))
            .ok_or_else(|| invalid("the Pod has neither metadata.name nor metadata.generateName".into()))?;
        pod.metadata.name = Some(generated);
    }
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some(namespace.to_string());
    }
    if pod.metadata.uid.as_deref().unwrap_or("").is_empty() {
        // The API server assigns one; without it the pod would count as every uid-less pod (nominated
        // pods are told apart from the pod being scheduled by uid).
        pod.metadata.uid = Some(format!("kubectl-sched-file-{shown}"));
    }
    // As a snapshot's pods: a quantity the API server would refuse is an error, not a silent 0.
    check_pod(&pod).map_err(|e| invalid(e.to_string()))?;
    admit(&mut pod, &objects.priority_classes).map_err(|e| invalid(format!("Pod {}: {e}", pod_key(&pod))))?;
    Ok(pod)
}

/// `namespace/name` of a pod whose namespace and name are set.
fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The pods of a YAML or JSON text: one or more documents, each a Pod or a List of them. Errors say
/// where (document, line and column) when the parser knows.
fn parse_pods(text: &str) -> Result<Vec<Pod>, String> {
    use sched_core::snapshot::load::{decode_document, read_documents};
    let mut pods = Vec::new();
    // JSON read as JSON; YAML behind the snapshot loader's flow depth guard.
    let documents = read_documents(text).map_err(|e| e.to_string())?;
    for (i, value) in documents.into_iter().enumerate() {
        if value.is_null() {
            continue;
        }
        match value.get("kind").and_then(serde_json::Value::as_str) {
            Some("Pod") => {
                // Decoded again straight from the text, so a schema error carries its line.
                pods.push(decode_document(text, i, "Pod").map_err(|e| e.to_string())?);
            }
            Some(kind) if kind.ends_with("List") => {
                let items = match value.get("items") {
                    Some(serde_json::Value::Array(items)) => items.as_slice(),
                    Some(serde_json::Value::Null) | None => &[],
                    Some(_) => return Err(format!("document {i}: items: not a list")),
                };
                for (j, item) in items.iter().enumerate() {
                    if item.get("kind").and_then(serde_json::Value::as_str) == Some("Pod") {
                        pods.push(
                            serde_json::from_value(item.clone())
                                .map_err(|e| format!("document {i}: items[{j}]: Pod: {e}"))?,
                        );
                    }
                }
            }
            Some(_) => {}
            None => return Err(format!("document {i} has no kind")),
        }
    }
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    #[test]
    fn pod_files_keep_limits_and_say_where_they_break() {
        let pods = parse_pods(
            "kind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    resources:\n      \
             limits: {cpu: \"2\"}\n---\nkind: Service\nmetadata: {name: s}\n",
        )
        .unwrap();
        assert_eq!(pods.len(), 1);
        let limits = pods[0].spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .unwrap();
        assert_eq!(limits.get("cpu"), Some(&Quantity("2".into())));

        let err = parse_pods("kind: Pod\nmetadata: {name: a}\nspec:\n  containers: 7\n").unwrap_err();
        assert!(
            err.starts_with("document 0: Pod: spec.containers: invalid type") && err.contains("line 4"),
            "{err}"
        );
        let err = parse_pods("metadata: {name: a}\n").unwrap_err();
        assert_eq!(err, "document 0 has no kind");
    }

    #[test]
    fn pod_names_accept_kubectl_prefixes() {
        assert_eq!(pod_name("pod/web"), "web");
        assert_eq!(pod_name("pods/web"), "web");
        assert_eq!(pod_name("web"), "web");
    }

    #[test]
    fn a_bound_pod_is_unbound_and_its_nomination_dropped() {
        let mut pod = Pod {
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                nominated_node_name: Some("n2".into()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        assert_eq!(unbind(&mut pod), Some("n1".to_string()));
        assert_eq!(pod.spec.as_ref().unwrap().node_name, None);
        assert_eq!(pod.status.as_ref().unwrap().nominated_node_name, None);
        // A pending pod keeps its nomination.
        pod.status.as_mut().unwrap().nominated_node_name = Some("n2".into());
        assert_eq!(unbind(&mut pod), None);
        assert_eq!(
            pod.status.as_ref().unwrap().nominated_node_name.as_deref(),
            Some("n2")
        );
    }
}
