//! What the API server refused (a 403), and which role of deploy/rbac/ grants it: running a command
//! again cannot fix a missing permission, binding the right role can.
//!
//! kube-apiserver words every RBAC denial the same way (the authorizer's `forbiddenMessage`): `User "x"
//! cannot <verb> resource "<resource>[/<subresource>]" in API group "<group>"` and `in the namespace
//! "<ns>"` or `at the cluster scope`; [`Denied::parse`] reads that back, and [`ROLES`] mirrors the
//! manifests (a test checks the two agree).

use sched_core::apply::{ActionResult, ApplyError, Outcome};

/// One permission the API server refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The verb (`list`, `delete`, `create`, `patch`, ...).
    pub verb: String,
    /// The resource, with its subresource if any (`pods/eviction`).
    pub resource: String,
    /// The API group ("" for the core group).
    pub group: String,
    /// The namespace, or None at the cluster scope.
    pub namespace: Option<String>,
}

/// A role of deploy/rbac/: its name, its manifest and what it grants.
#[derive(Debug)]
pub struct Role {
    /// The ClusterRole's name.
    pub name: &'static str,
    /// Its manifest, relative to the repository.
    pub manifest: &'static str,
    /// Its rules: API group, resources, verbs.
    pub rules: &'static [(&'static str, &'static [&'static str], &'static [&'static str])],
}

/// The roles of deploy/rbac/, as their manifests grant (checked against them by a test).
pub const ROLES: [Role; 2] = [
    Role {
        name: "kubectl-sched-reader",
        manifest: "deploy/rbac/kubectl-sched-reader.yaml",
        rules: &[
            (
                "",
                &[
                    "nodes",
                    "pods",
                    "namespaces",
                    "persistentvolumes",
                    "persistentvolumeclaims",
                    "services",
                    "replicationcontrollers",
                ],
                &["get", "list", "watch"],
            ),
            (
                "apps",
                &["replicasets", "statefulsets"],
                &["get", "list", "watch"],
            ),
            (
                "storage.k8s.io",
                &[
                    "storageclasses",
                    "csinodes",
                    "csidrivers",
                    "csistoragecapacities",
                    "volumeattachments",
                ],
                &["get", "list", "watch"],
            ),
            ("policy", &["poddisruptionbudgets"], &["get", "list", "watch"]),
            (
                "scheduling.k8s.io",
                &["priorityclasses", "workloads", "podgroups", "compositepodgroups"],
                &["get", "list", "watch"],
            ),
            ("karpenter.sh", &["nodepools"], &["get", "list", "watch"]),
            (
                "resource.k8s.io",
                &[
                    "deviceclasses",
                    "resourceslices",
                    "resourceclaims",
                    "resourceclaimtemplates",
                    "devicetaintrules",
                ],
                &["get", "list", "watch"],
            ),
            ("coordination.k8s.io", &["leases"], &["get"]),
            ("", &["events"], &["list"]),
        ],
    },
    Role {
        name: "kubectl-sched-preempter",
        manifest: "deploy/rbac/kubectl-sched-preempter.yaml",
        rules: &[
            ("", &["pods"], &["get", "delete"]),
            ("", &["pods/eviction"], &["create"]),
            ("", &["pods/status"], &["patch"]),
            ("events.k8s.io", &["events"], &["create"]),
        ],
    },
];

impl Denied {
    /// The denial in an API server's 403 message, if it is worded as RBAC words it.
    pub fn parse(message: &str) -> Option<Denied> {
        // The last " cannot ": what precedes the server's words may say "cannot list Node" too.
        let rest = &message[message.rfind(" cannot ")? + " cannot ".len()..];
        let (verb, rest) = rest.split_once(" resource \"")?;
        let (resource, rest) = rest.split_once('"')?;
        let rest = rest.strip_prefix(" in API group \"")?;
        let (group, rest) = rest.split_once('"')?;
        let namespace = rest
            .strip_prefix(" in the namespace \"")
            .and_then(|ns| ns.split_once('"'))
            .map(|(ns, _)| ns.to_string());
        (!verb.is_empty() && !verb.contains(' ') && !resource.is_empty()).then(|| Denied {
            verb: verb.to_string(),
            resource: resource.to_string(),
            group: group.to_string(),
            namespace,
        })
    }

    /// The role of deploy/rbac/ that grants this permission, if one does.
    pub fn granted_by(&self) -> Option<&'static Role> {
        ROLES.iter().find(|role| {
            role.rules.iter().any(|(group, resources, verbs)| {
                *group == self.group
                    && resources.contains(&self.resource.as_str())
                    && verbs.contains(&self.verb.as_str())
            })
        })
    }

    /// `delete pods in namespace "shop"`, `list storageclasses.storage.k8s.io cluster-wide`.
    pub fn permission(&self) -> String {
        let resource = if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        match &self.namespace {
            Some(ns) => format!("{} {resource} in namespace {ns:?}", self.verb),
            None => format!("{} {resource} cluster-wide", self.verb),
        }
    }

    /// What to do: the missing permission and the role that grants it.
    pub fn advice(&self) -> String {
        match self.granted_by() {
            Some(role) => format!(
                "missing permission: {}; the ClusterRole {} grants it ({}): ask an administrator to bind it \
                 to you (running the command again will not help)",
                self.permission(),
                role.name,
                role.manifest
            ),
            None => format!(
                "missing permission: {} (no role of deploy/rbac/ grants it); running the command again will \
                 not help",
                self.permission()
            ),
        }
    }
}

/// The advice for an error's one-line text when it is an RBAC denial, else None.
pub fn advice_for(text: &str) -> Option<String> {
    if !text.contains("forbidden") {
        return None;
    }
    Denied::parse(text).map(|denied| denied.advice())
}

/// The permission a write of a plan was refused, when it was refused for want of one (HTTP 403).
pub fn denied_write(result: &ActionResult) -> Option<Denied> {
    match &result.outcome {
        Outcome::Failed(ApplyError::Api {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 403 => Denied::parse(&status.message),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_are_read_back_from_the_api_servers_words() {
        let cases = [
            (
                "nodes is forbidden: User \"bob\" cannot list resource \"nodes\" in API group \"\" at the cluster scope",
                Some(("list", "nodes", "", None)),
                Some("kubectl-sched-reader"),
            ),
            (
                "pods \"v\" is forbidden: User \"system:serviceaccount:a:r\" cannot delete resource \"pods\" in \
                 API group \"\" in the namespace \"shop\"",
                Some(("delete", "pods", "", Some("shop"))),
                Some("kubectl-sched-preempter"),
            ),
            (
                "pods \"v\" is forbidden: User \"r\" cannot create resource \"pods/eviction\" in API group \"\" in \
                 the namespace \"shop\"",
                Some(("create", "pods/eviction", "", Some("shop"))),
                Some("kubectl-sched-preempter"),
            ),
            (
                "storageclasses.storage.k8s.io is forbidden: User \"bob\" cannot list resource \"storageclasses\" \
                 in API group \"storage.k8s.io\" at the cluster scope",
                Some(("list", "storageclasses", "storage.k8s.io", None)),
                Some("kubectl-sched-reader"),
            ),
            (
                "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" \
                 at the cluster scope",
                Some(("impersonate", "users", "", None)),
                None,
            ),
            ("etcd is down", None, None),
        ];
        for (message, want, role) in cases {
            let got = Denied::parse(message);
            let want = want.map(
                |(verb, resource, group, ns): (&str, &str, &str, Option<&str>)| Denied {
                    verb: verb.into(),
                    resource: resource.into(),
                    group: group.into(),
                    namespace: ns.map(Into::into),
                },
            );
            assert_eq!(got, want, "{message}");
            assert_eq!(
                got.as_ref().and_then(Denied::granted_by).map(|r| r.name),
                role,
                "{message}"
            );
        }
    }

    #[test]
    fn the_advice_names_the_permission_and_the_role_in_one_line() {
        let text = "cannot list Node (v1): Error from server (Forbidden): nodes is forbidden: User \"bob\" cannot \
                    list resource \"nodes\" in API group \"\" at the cluster scope";
        let advice = advice_for(text).expect("a denial");
        assert!(
            advice.contains("list nodes cluster-wide")
                && advice.contains("kubectl-sched-reader")
                && advice.contains("deploy/rbac/kubectl-sched-reader.yaml")
                && !advice.contains('\n'),
            "{advice}"
        );
        assert_eq!(
            advice_for("Error from server (NotFound): pods \"p\" not found"),
            None
        );
    }

    /// The table is the manifests': every rule of deploy/rbac/*.yaml is in [`ROLES`] and nothing else.
    #[test]
    fn the_roles_are_the_manifests() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for role in &ROLES {
            let path = root.join(role.manifest);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let doc: serde_json::Value = yaml_serde::from_str(&text).expect("the manifest is YAML");
            assert_eq!(doc["metadata"]["name"], role.name, "{}", role.manifest);
            let mut in_file: Vec<(String, String, String)> = Vec::new();
            for rule in doc["rules"].as_array().expect("rules") {
                for group in rule["apiGroups"].as_array().expect("apiGroups") {
                    for resource in rule["resources"].as_array().expect("resources") {
                        for verb in rule["verbs"].as_array().expect("verbs") {
                            in_file.push((
                                group.as_str().unwrap().into(),
                                resource.as_str().unwrap().into(),
                                verb.as_str().unwrap().into(),
                            ));
                        }
                    }
                }
            }
            let mut in_table: Vec<(String, String, String)> = role
                .rules
                .iter()
                .flat_map(|(group, resources, verbs)| {
                    resources.iter().flat_map(move |resource| {
                        verbs
                            .iter()
                            .map(move |verb| (group.to_string(), resource.to_string(), verb.to_string()))
                    })
                })
                .collect();
            in_file.sort();
            in_table.sort();
            assert_eq!(in_table, in_file, "{} and ROLES differ", role.manifest);
        }
    }
}
