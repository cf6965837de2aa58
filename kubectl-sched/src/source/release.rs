//! Which kube-scheduler release a command evaluates with: the one `--kube-version` names, else the
//! API server's (`GET /version`), else the one a snapshot file records, else the pinned release
//! (with a warning saying so); then `--feature-gates` over that release's defaults. The engine is
//! built from the result ([`Release::features`]), so that messages, plugins and gates are those of
//! the kube-scheduler the user actually runs.

use k8s_openapi::apimachinery::pkg::version::Info;
use sched_core::features::{FeatureGateError, FeatureGates, KubeVersion, VersionError};
use sched_core::snapshot::ClusterObjects;

use crate::cli::ReleaseArgs;

/// Where the cluster's own version was to be read from, and what it said.
#[derive(Debug, Clone, PartialEq)]
pub enum VersionSource {
    /// The API server's `GET /version` answer (None: it could not be read).
    Server(Option<Info>),
    /// What the snapshot file (its path) records as `kubeVersion` (None: nothing).
    File {
        /// The file, for messages.
        path: String,
        /// The recorded version, as written.
        recorded: Option<String>,
    },
}

/// Why no release could be chosen: a usage error (exit code 2), on one line.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// `--kube-version` is malformed or outside the supported range.
    #[error("--kube-version: {0}")]
    Flag(#[source] VersionError),
    /// The API server's or the file's version is outside the supported range, and `--kube-version`
    /// does not pick one.
    #[error("{0}")]
    Cluster(#[source] VersionError),
    /// The snapshot file records a version that is not one.
    #[error("{path}: kubeVersion: {source}")]
    Recorded {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: VersionError,
    },
    /// `--feature-gates` is malformed, or names a gate the release does not have or may not change.
    #[error("--feature-gates: {0}")]
    FeatureGates(#[source] FeatureGateError),
}

/// The release chosen, and what to tell the user about the choice.
#[derive(Debug, Clone)]
pub struct Release {
    /// The gates (and the release, `features.version`) to build the engine with.
    pub features: FeatureGates,
    /// A warning to print: the pinned release used for want of a version, or `--kube-version` against
    /// another version of the cluster.
    pub warning: Option<String>,
}

/// The hint of the unsupported-version error when the cluster's version is the culprit.
const PICK_ONE: &str = "pick a supported release with --kube-version";

/// The release a `GET /version` answer names (see [`KubeVersion::from_server`]).
pub fn server_release(info: &Info) -> Option<KubeVersion> {
    KubeVersion::from_server(&info.git_version, &info.major, &info.minor)
}

/// How the server names itself in messages: its `gitVersion`, else `v<major>.<minor>`.
fn server_name(info: &Info) -> String {
    if info.git_version.is_empty() {
        format!("v{}.{}", info.major, info.minor)
    } else {
        info.git_version.clone()
    }
}

impl Release {
    /// Chooses the release for `args` and what the cluster (or file) says of itself.
    pub fn choose(args: &ReleaseArgs, source: &VersionSource) -> Result<Release, ReleaseError> {
        let flag = args
            .kube_version
            .as_deref()
            .map(|text| KubeVersion::parse(text).and_then(|v| v.supported("")))
            .transpose()
            .map_err(ReleaseError::Flag)?;
        // The cluster's own version, and how to name it ("the API server is v1.33.5-eks-1").
        let (own, named): (Option<KubeVersion>, String) = match source {
            VersionSource::Server(Some(info)) => (
                server_release(info),
                format!("the API server is {}", server_name(info)),
            ),
            VersionSource::Server(None) => (None, "the API server's version could not be read".into()),
            VersionSource::File {
                path,
                recorded: Some(text),
            } => {
                let version = KubeVersion::parse(text).map_err(|source| ReleaseError::Recorded {
                    path: path.clone(),
                    source,
                })?;
                (Some(version), format!("{path} was taken from Kubernetes {text}"))
            }
            VersionSource::File { path, recorded: None } => (
                None,
                format!(
                    "{path} records no Kubernetes version (a file from kubectl, or an older kubectl-sched)"
                ),
            ),
        };
        let (version, warning) = match (flag, own) {
            (Some(flag), Some(own)) if flag != own => (
                flag,
                Some(format!(
                    "{named}; evaluating with kube-scheduler {flag}'s semantics, as --kube-version says"
                )),
            ),
            (Some(flag), _) => (flag, None),
            (None, Some(own)) => {
                let hint = format!("{named}; {PICK_ONE}");
                (own.supported(&hint).map_err(ReleaseError::Cluster)?, None)
            }
            (None, None) => {
                let unreadable = match source {
                    VersionSource::Server(Some(info)) => {
                        format!(
                            "the API server's version {:?} names no Kubernetes release",
                            server_name(info)
                        )
                    }
                    _ => named,
                };
                (
                    KubeVersion::PINNED,
                    Some(format!(
                        "{unreadable}; evaluating with kube-scheduler {}'s semantics (use --kube-version to \
                         pick another release)",
                        KubeVersion::PINNED
                    )),
                )
            }
        };
        let mut features = FeatureGates::for_version(version);
        if let Some(text) = &args.feature_gates {
            features = with_feature_gates(features, text)?;
        }
        Ok(Release { features, warning })
    }
}

/// The gate under which kube-scheduler reads PodGroups and runs gang scheduling (v1.37).
const GENERIC_WORKLOAD: &str = "GenericWorkload";

impl Release {
    /// What the cluster's objects say of a gate the API cannot report: kube-scheduler's gates are its
    /// own flags, but PodGroups exist only where the API server serves the workload API
    /// (GenericWorkload on) and a workload controller made them for the scheduler to read. With
    /// PodGroups in the cluster and `--feature-gates` silent about the gate, GenericWorkload is
    /// turned on; the warning says so and how to evaluate without it.
    pub fn follow_cluster(&mut self, objects: &ClusterObjects) -> Option<String> {
        self.follow_pod_groups(objects.pod_groups.len(), "the cluster has")
    }

    /// [`Release::follow_cluster`] for `groups` PodGroups wherever they come from (`source`: "the
    /// cluster has", "the cluster and -f have").
    pub fn follow_pod_groups(&mut self, groups: usize, source: &str) -> Option<String> {
        let set_by_flag = self
            .features
            .explicitly_set()
            .iter()
            .any(|(name, _)| *name == GENERIC_WORKLOAD);
        if groups == 0 || self.features.generic_workload || set_by_flag {
            return None;
        }
        self.features = self
            .features
            .with_overrides(&format!("{GENERIC_WORKLOAD}=true"))
            .ok()?;
        Some(format!(
            "{source} {groups} PodGroup(s): evaluating with {GENERIC_WORKLOAD} on, as the kube-scheduler \
             that reads them runs (--feature-gates {GENERIC_WORKLOAD}=false to evaluate without gang scheduling)"
        ))
    }
}

/// The gate under which kube-apiserver keeps a PodGroup's topology constraint and kube-scheduler
/// places the group in one topology domain (alpha in v1.37).
const TOPOLOGY_AWARE_WORKLOAD_SCHEDULING: &str = "TopologyAwareWorkloadScheduling";

impl Release {
    /// What the cluster's PodGroups say of TopologyAwareWorkloadScheduling: kube-apiserver drops a
    /// PodGroup's `spec.schedulingConstraints` unless the gate is on, so a PodGroup that has them
    /// comes from a cluster that runs with it (kube-scheduler's gates are set alike). With
    /// `--feature-gates` silent about it (and GenericWorkload on, which it needs) the gate is turned
    /// on; the warning says so.
    pub fn follow_topology(&mut self, objects: &ClusterObjects) -> Option<String> {
        let constrained = objects
            .pod_groups
            .iter()
            .filter(|g| sched_core::snapshot::pod_groups::topology_key(g).is_some())
            .count();
        let set_by_flag = self
            .features
            .explicitly_set()
            .iter()
            .any(|(name, _)| *name == TOPOLOGY_AWARE_WORKLOAD_SCHEDULING);
        if constrained == 0
            || self.features.topology_aware_workload_scheduling
            || set_by_flag
            || !self.features.generic_workload
        {
            return None;
        }
        self.features = self
            .features
            .with_overrides(&format!("{TOPOLOGY_AWARE_WORKLOAD_SCHEDULING}=true"))
            .ok()?;
        Some(format!(
            "{constrained} PodGroup(s) keep a topology constraint, which kube-apiserver keeps only with \
             {TOPOLOGY_AWARE_WORKLOAD_SCHEDULING} on: evaluating with it on (--feature-gates \
             {TOPOLOGY_AWARE_WORKLOAD_SCHEDULING}=false to evaluate without topology placement)"
        ))
    }
}

/// The gate under which kube-apiserver serves CompositePodGroups and keeps a PodGroup's parent, and
/// kube-scheduler schedules a tree of groups whole (alpha in v1.37; needs topology placement).
const COMPOSITE_POD_GROUP: &str = "CompositePodGroup";

impl Release {
    /// What the cluster's CompositePodGroups say of CompositePodGroup: they exist only where the API
    /// server serves scheduling.k8s.io/v1alpha3 with the gate on (kube-scheduler's gates are set
    /// alike). With `--feature-gates` silent about it (and GenericWorkload on) the gate and the
    /// TopologyAwareWorkloadScheduling it needs are turned on; the warning says so.
    pub fn follow_composite(&mut self, objects: &ClusterObjects) -> Option<String> {
        let trees = objects.composite_pod_groups.len();
        let set_by_flag = self
            .features
            .explicitly_set()
            .iter()
            .any(|(name, _)| *name == COMPOSITE_POD_GROUP);
        if trees == 0 || self.features.composite_pod_group || set_by_flag || !self.features.generic_workload {
            return None;
        }
        self.features = self
            .features
            .with_overrides(&format!(
                "{COMPOSITE_POD_GROUP}=true,{TOPOLOGY_AWARE_WORKLOAD_SCHEDULING}=true"
            ))
            .ok()?;
        Some(format!(
            "the cluster has {trees} CompositePodGroup(s): evaluating with {COMPOSITE_POD_GROUP} (and \
             {TOPOLOGY_AWARE_WORKLOAD_SCHEDULING}, which it needs) on (--feature-gates \
             {COMPOSITE_POD_GROUP}=false to evaluate each PodGroup alone)"
        ))
    }
}

/// `--feature-gates` over the release's defaults, in kube-scheduler's syntax and words (a gate the
/// release does not have, or may not change, is refused as its kube-scheduler refuses it).
fn with_feature_gates(features: FeatureGates, text: &str) -> Result<FeatureGates, ReleaseError> {
    features.with_overrides(text).map_err(ReleaseError::FeatureGates)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::source::skew::tests::info;

    fn args(kube_version: Option<&str>) -> ReleaseArgs {
        ReleaseArgs {
            kube_version: kube_version.map(str::to_string),
            feature_gates: None,
        }
    }

    /// PodGroups in the cluster turn GenericWorkload on, with a warning, unless --feature-gates names
    /// the gate; without PodGroups nothing changes.
    #[test]
    fn pod_groups_in_the_cluster_turn_generic_workload_on_unless_the_flag_decides() {
        use sched_core::testing::gang;
        let server = VersionSource::Server(Some(info("1", "37", "v1.37.2")));
        let with_groups = ClusterObjects {
            pod_groups: vec![gang("train", 3).obj()],
            ..Default::default()
        };
        let choose = |gates: Option<&str>| {
            let args = ReleaseArgs {
                kube_version: None,
                feature_gates: gates.map(str::to_string),
            };
            Release::choose(&args, &server).expect("release")
        };
        // (case, --feature-gates, objects, GenericWorkload after, warned)
        let cases = [
            ("pod groups, no flag", None, &with_groups, true, true),
            ("no pod groups", None, &ClusterObjects::default(), false, false),
            (
                "the flag turns it off",
                Some("GenericWorkload=false"),
                &with_groups,
                false,
                false,
            ),
            (
                "the flag turns it on",
                Some("GenericWorkload=true"),
                &with_groups,
                true,
                false,
            ),
        ];
        for (case, gates, objects, on, warned) in cases {
            let mut release = choose(gates);
            let warning = release.follow_cluster(objects);
            assert_eq!(release.features.generic_workload, on, "{case}");
            assert_eq!(warning.is_some(), warned, "{case}: {warning:?}");
            if let Some(warning) = warning {
                assert!(warning.contains("1 PodGroup(s)"), "{warning}");
            }
        }
    }

    fn file(recorded: Option<&str>) -> VersionSource {
        VersionSource::File {
            path: "snap.yaml".into(),
            recorded: recorded.map(str::to_string),
        }
    }

    /// A PodGroup with a topology constraint turns TopologyAwareWorkloadScheduling on (once
    /// GenericWorkload is), unless the flag names the gate.
    #[test]
    fn topology_constraints_turn_topology_placement_on_unless_the_flag_decides() {
        use sched_core::testing::gang;
        let server = VersionSource::Server(Some(info("1", "37", "v1.37.2")));
        let constrained = ClusterObjects {
            pod_groups: vec![gang("train", 3).topology("zone").obj()],
            ..Default::default()
        };
        let plain = ClusterObjects {
            pod_groups: vec![gang("train", 3).obj()],
            ..Default::default()
        };
        // (case, --feature-gates, objects, gate on after, warned)
        let cases = [
            ("a constrained PodGroup", None, &constrained, true, true),
            ("no constraint", None, &plain, false, false),
            (
                "the flag turns it off",
                Some("TopologyAwareWorkloadScheduling=false"),
                &constrained,
                false,
                false,
            ),
            (
                "GenericWorkload kept off by the flag",
                Some("GenericWorkload=false"),
                &constrained,
                false,
                false,
            ),
        ];
        for (case, gates, objects, on, warned) in cases {
            let mut release = Release::choose(
                &ReleaseArgs {
                    kube_version: None,
                    feature_gates: gates.map(str::to_string),
                },
                &server,
            )
            .expect("release");
            release.follow_cluster(objects);
            let warning = release.follow_topology(objects);
            assert_eq!(release.features.topology_aware_workload_scheduling, on, "{case}");
            assert_eq!(warning.is_some(), warned, "{case}: {warning:?}");
        }
    }

    #[test]
    fn the_release_is_the_flag_else_the_clusters_else_the_pinned_one() {
        let server = |v: &str| VersionSource::Server(Some(info("1", "", v)));
        let pinned = KubeVersion::PINNED;
        // (case, flag, source, chosen, how the warning starts)
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            VersionSource,
            KubeVersion,
            Option<&'a str>,
        );
        let cases: [Case<'_>; 10] = [
            ("server", None, server("v1.34.4"), KubeVersion::new(34, 4), None),
            (
                "server patch decides",
                None,
                server("v1.34.2"),
                KubeVersion::new(34, 2),
                None,
            ),
            (
                "managed cloud",
                None,
                server("v1.33.5-eks-1"),
                KubeVersion::new(33, 5),
                None,
            ),
            (
                "flag over server",
                Some("v1.37.1"),
                server("v1.33.13"),
                KubeVersion::new(37, 1),
                Some(
                    "the API server is v1.33.13; evaluating with kube-scheduler v1.37.1's semantics, as --kube-version says",
                ),
            ),
            (
                "flag equal to server",
                Some("v1.35"),
                server("v1.35.4"),
                KubeVersion::new(35, 4),
                None,
            ),
            (
                "flag picks an out-of-range server",
                Some("v1.37"),
                server("v1.32.1"),
                pinned,
                Some("the API server is v1.32.1; evaluating with kube-scheduler v1.37.2's"),
            ),
            (
                "no /version",
                None,
                VersionSource::Server(None),
                pinned,
                Some("the API server's version could not be read; evaluating with kube-scheduler v1.37.2's"),
            ),
            ("file", None, file(Some("v1.35.4")), KubeVersion::new(35, 4), None),
            (
                "file without a version",
                None,
                file(None),
                pinned,
                Some("snap.yaml records no Kubernetes version"),
            ),
            (
                "flag over file",
                Some("v1.34"),
                file(Some("v1.36.3")),
                KubeVersion::new(34, 4),
                Some("snap.yaml was taken from Kubernetes v1.36.3; evaluating with kube-scheduler v1.34.4's"),
            ),
        ];
        for (name, flag, source, want, warning) in cases {
            let release = Release::choose(&args(flag), &source).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(release.features.version, want, "{name}");
            assert_eq!(release.features, FeatureGates::for_version(want), "{name}");
            match (warning, &release.warning) {
                (None, None) => {}
                (Some(w), Some(got)) => assert!(got.starts_with(w), "{name}: {got}"),
                (w, got) => panic!("{name}: warning {got:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn versions_outside_the_range_are_one_line_errors() {
        let cases = [
            (
                Some("v1.32"),
                VersionSource::Server(Some(info("1", "34", "v1.34.4"))),
                "--kube-version: Kubernetes v1.32.0 is not supported: kubectl-sched models kube-scheduler \
                 v1.33 to v1.37",
            ),
            (
                Some("1.x"),
                VersionSource::Server(None),
                "--kube-version: \"1.x\" is not a Kubernetes version (expected v1.MINOR or v1.MINOR.PATCH, \
                 e.g. v1.34.4)",
            ),
            (
                None,
                VersionSource::Server(Some(info("1", "32+", "v1.32.9-eks-1"))),
                "Kubernetes v1.32.9 is not supported: kubectl-sched models kube-scheduler v1.33 to v1.37; the \
                 API server is v1.32.9-eks-1; pick a supported release with --kube-version",
            ),
            (
                None,
                file(Some("v1.38.0")),
                "Kubernetes v1.38.0 is not supported: kubectl-sched models kube-scheduler v1.33 to v1.37; \
                 snap.yaml was taken from Kubernetes v1.38.0; pick a supported release with --kube-version",
            ),
            (
                None,
                file(Some("latest")),
                "snap.yaml: kubeVersion: \"latest\" is not a Kubernetes version (expected v1.MINOR or \
                 v1.MINOR.PATCH, e.g. v1.34.4)",
            ),
        ];
        for (flag, source, want) in cases {
            let err = Release::choose(&args(flag), &source).unwrap_err().to_string();
            assert_eq!(err, want);
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn feature_gates_apply_over_the_chosen_releases_defaults() {
        let server = VersionSource::Server(Some(info("1", "33", "v1.33.13")));
        let with = |gates: &str| ReleaseArgs {
            kube_version: None,
            feature_gates: Some(gates.to_string()),
        };
        let defaults = FeatureGates::for_version(KubeVersion::new(33, 13));
        assert!(!defaults.pod_level_resources);
        let release = Release::choose(&with("PodLevelResources=true"), &server).expect("a 1.33 gate");
        assert!(release.features.pod_level_resources);
        assert_eq!(release.features.version, KubeVersion::new(33, 13));
        // A gate 1.33 does not have: refused in one line, naming the flag.
        let err = Release::choose(&with("NodeDeclaredFeatures=true"), &server).unwrap_err();
        assert!(matches!(err, ReleaseError::FeatureGates(_)), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with("--feature-gates: ") && !text.contains('\n'),
            "{text}"
        );
        assert!(text.contains("NodeDeclaredFeatures"), "{text}");
    }
}
