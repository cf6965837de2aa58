//! Karpenter's node requirements (`sigs.k8s.io/karpenter/pkg/scheduling`, `Requirement` and
//! `Requirements`): the label constraints of a NodePool, of the node a new NodeClaim would become and
//! of a pod, as sets of allowed values per key that intersect. Karpenter decides with these, not with
//! kube-scheduler's node selectors: a key the pool leaves open is "any value", a key only a pod names
//! is "unknown" unless it is one of Karpenter's well-known labels. The words of its errors
//! (`label "x" does not have known values`, `key k, a not in b`) are Karpenter's, byte for byte.
//!
//! Go iterates maps in random order where it reports the first or every failing key; here keys are
//! visited in sorted order, so that one answer is always the same.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Pod};

/// `karpenter.sh/nodepool`: the label every node of a pool carries.
pub const NODE_POOL_LABEL: &str = "karpenter.sh/nodepool";
/// `karpenter.sh/capacity-type`: on-demand, spot or reserved.
pub const CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";
/// `karpenter.sh/registered`, a requirement Karpenter adds for its DaemonSet simulation.
pub const NODE_REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// `karpenter.sh/initialized`, a requirement Karpenter adds for its DaemonSet simulation.
pub const NODE_INITIALIZED_LABEL: &str = "karpenter.sh/initialized";
/// `kubernetes.io/hostname`.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// `v1.WellKnownLabels`: keys a pod may ask for that a pool does not name (the provider's instance
/// types and offerings define them).
pub const WELL_KNOWN_LABELS: &[&str] = &[
    NODE_POOL_LABEL,
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    CAPACITY_TYPE_LABEL,
    "node.kubernetes.io/windows-build",
];

/// `v1.RestrictedLabels`: left out when requirements are printed.
const RESTRICTED_LABELS: &[&str] = &[HOSTNAME_LABEL];

/// `v1.NormalizedLabels`: deprecated keys read as their successors.
const NORMALIZED_LABELS: &[(&str, &str)] = &[
    (
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    ),
    ("beta.kubernetes.io/arch", "kubernetes.io/arch"),
    ("beta.kubernetes.io/os", "kubernetes.io/os"),
    (
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    ),
];

/// What a requirement cannot be built from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    /// An operator Karpenter does not know.
    #[error("requirement {key}: unknown operator {operator:?}")]
    UnknownOperator {
        /// The requirement's key.
        key: String,
        /// The operator as written.
        operator: String,
    },
    /// `Gt`, `Lt`, `Gte` or `Lte` without exactly one integer value (the API server's validation).
    #[error("requirement {key}: {operator} takes one integer value, got {values:?}")]
    NotAnInteger {
        /// The requirement's key.
        key: String,
        /// The operator as written.
        operator: String,
        /// The values as written.
        values: Vec<String>,
    },
}

/// The operator a requirement reads as once built (`Requirement.Operator()`): bounds are `Exists`
/// with bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// One of a finite set of values.
    In,
    /// Any value but some.
    NotIn,
    /// Any value.
    Exists,
    /// No value at all: the label must be absent.
    DoesNotExist,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
        })
    }
}

/// One key's allowed values: `values` when not `complement`, everything but `values` when it is,
/// within the inclusive integer bounds when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key (normalized).
    pub key: String,
    complement: bool,
    values: BTreeSet<String>,
    gte: Option<i64>,
    lte: Option<i64>,
    /// `minValues`: how many distinct values the launch must keep open.
    pub min_values: Option<i64>,
}

impl Requirement {
    /// `NewRequirementWithFlexibility`: a node selector requirement of `operator` (`In`, `NotIn`,
    /// `Exists`, `DoesNotExist`, `Gt`, `Lt`, `Gte`, `Lte`) over `values`.
    pub fn new(
        key: &str,
        operator: &str,
        values: &[String],
        min_values: Option<i64>,
    ) -> Result<Self, RequirementError> {
        let key = NORMALIZED_LABELS
            .iter()
            .find(|(old, _)| *old == key)
            .map_or(key, |(_, new)| new)
            .to_owned();
        let mut requirement = Requirement {
            key,
            complement: true,
            values: BTreeSet::new(),
            gte: None,
            lte: None,
            min_values,
        };
        let bound = |requirement: &Requirement| -> Result<i64, RequirementError> {
            match values {
                [value] => value.parse::<i64>().ok(),
                _ => None,
            }
            .ok_or_else(|| RequirementError::NotAnInteger {
                key: requirement.key.clone(),
                operator: operator.to_owned(),
                values: values.to_vec(),
            })
        };
        match operator {
            "In" => {
                requirement.complement = false;
                requirement.values = values.iter().cloned().collect();
            }
            "NotIn" => requirement.values = values.iter().cloned().collect(),
            "Exists" => {}
            "DoesNotExist" => requirement.complement = false,
            // Gt N is Gte N+1; at the largest integer nothing is greater.
            "Gt" => match bound(&requirement)?.checked_add(1) {
                Some(gte) => requirement.gte = Some(gte),
                None => requirement.complement = false,
            },
            "Lt" => requirement.lte = Some(bound(&requirement)?.saturating_sub(1)),
            "Gte" => requirement.gte = Some(bound(&requirement)?),
            "Lte" => requirement.lte = Some(bound(&requirement)?),
            other => {
                return Err(RequirementError::UnknownOperator {
                    key: requirement.key,
                    operator: other.to_owned(),
                });
            }
        }
        Ok(requirement)
    }

    /// `key In [value]`.
    pub fn equal(key: &str, value: &str) -> Self {
        Requirement {
            key: key.to_owned(),
            complement: false,
            values: BTreeSet::from([value.to_owned()]),
            gte: None,
            lte: None,
            min_values: None,
        }
    }

    /// `key Exists`: what an undefined key allows (`Requirements.Get`).
    pub fn exists(key: &str) -> Self {
        Requirement {
            key: key.to_owned(),
            complement: true,
            values: BTreeSet::new(),
            gte: None,
            lte: None,
            min_values: None,
        }
    }

    /// The operator this requirement reads as.
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// Whether `value` is allowed.
    pub fn has(&self, value: &str) -> bool {
        self.values.contains(value) != self.complement && within_bounds(value, self.gte, self.lte)
    }

    /// The allowed values of an `In` requirement, sorted.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.values.iter().map(String::as_str)
    }

    /// `Intersection`: the values both allow.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let gte = max_bound(self.gte, other.gte);
        let lte = min_bound(self.lte, other.lte);
        let min_values = max_bound(self.min_values, other.min_values);
        if let (Some(low), Some(high)) = (gte, lte)
            && low > high
        {
            return Requirement {
                key: self.key.clone(),
                complement: false,
                values: BTreeSet::new(),
                gte: None,
                lte: None,
                min_values,
            };
        }
        let values: BTreeSet<String> = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values).cloned().collect(),
            (true, false) => other.values.difference(&self.values).cloned().collect(),
            (false, true) => self.values.difference(&other.values).cloned().collect(),
            (false, false) => self.values.intersection(&other.values).cloned().collect(),
        };
        let values = values
            .into_iter()
            .filter(|v| within_bounds(v, gte, lte))
            .collect();
        let (gte, lte) = if complement { (gte, lte) } else { (None, None) };
        Requirement {
            key: self.key.clone(),
            complement,
            values,
            gte,
            lte,
            min_values,
        }
    }

    /// `HasIntersection`: whether some value is allowed by both.
    pub fn has_intersection(&self, other: &Requirement) -> bool {
        let gte = max_bound(self.gte, other.gte);
        let lte = min_bound(self.lte, other.lte);
        if let (Some(low), Some(high)) = (gte, lte)
            && low > high
        {
            return false;
        }
        let allowed =
            |v: &String, excluded: &BTreeSet<String>| !excluded.contains(v) && within_bounds(v, gte, lte);
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other.values.iter().any(|v| allowed(v, &self.values)),
            (false, true) => self.values.iter().any(|v| allowed(v, &other.values)),
            (false, false) => self
                .values
                .iter()
                .any(|v| other.values.contains(v) && within_bounds(v, gte, lte)),
        }
    }
}

impl fmt::Display for Requirement {
    /// `Requirement.String()`: `key In [a b]`, at most five values then `and N others`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operator = self.operator();
        match operator {
            Operator::Exists | Operator::DoesNotExist => write!(f, "{} {operator}", self.key)?,
            Operator::In | Operator::NotIn => {
                let mut shown: Vec<String> = self.values.iter().take(5).cloned().collect();
                if self.values.len() > 5 {
                    shown.push(format!("and {} others", self.values.len() - 5));
                }
                write!(f, "{} {operator} [{}]", self.key, shown.join(" "))?;
            }
        }
        if let Some(gte) = self.gte {
            write!(f, " >={gte}")?;
        }
        if let Some(lte) = self.lte {
            write!(f, " <={lte}")?;
        }
        if let Some(min_values) = self.min_values {
            write!(f, " minValues {min_values}")?;
        }
        Ok(())
    }
}

fn within_bounds(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    let Ok(value) = value.parse::<i64>() else {
        return false;
    };
    gte.is_none_or(|low| value >= low) && lte.is_none_or(|high| value <= high)
}

fn max_bound(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_bound(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Why two sets of requirements cannot both hold (`Requirements.Compatible`), in Karpenter's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incompatible {
    /// A key the incoming side needs a value of, that this side does not define and that is not a
    /// well-known label.
    #[error("label {key:?} does not have known values{hint}")]
    UnknownLabel {
        /// The key.
        key: String,
        /// ` (typo of "k"?)` when a defined or well-known key looks like it, else empty.
        hint: String,
    },
    /// Keys both define with no value in common: `key k, <incoming> not in <existing>`, joined by
    /// `; ` as multierr joins them.
    #[error("{}", .0.join("; "))]
    NoCommonValue(Vec<String>),
}

/// Requirements by key, each key's requirements intersected (`Requirements`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements(BTreeMap<String, Requirement>);

impl Requirements {
    /// No requirement: every key allows anything.
    pub fn new() -> Self {
        Self::default()
    }

    /// `Add`: intersects `requirement` with what the key already requires.
    pub fn add(&mut self, requirement: Requirement) {
        let merged = match self.0.get(&requirement.key) {
            Some(existing) => requirement.intersection(existing),
            None => requirement,
        };
        self.0.insert(merged.key.clone(), merged);
    }

    /// Adds every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        for requirement in other.0.values() {
            self.add(requirement.clone());
        }
    }

    /// Whether `key` is constrained.
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// The requirement of `key`; an undefined key allows any value (`Exists`).
    pub fn get(&self, key: &str) -> Requirement {
        self.0
            .get(key)
            .cloned()
            .unwrap_or_else(|| Requirement::exists(key))
    }

    /// The requirements, by key.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.0.values()
    }

    /// `NewLabelRequirements`: each label as `key In [value]`.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut requirements = Self::new();
        for (key, value) in labels {
            requirements.add(Requirement::equal(key, value));
        }
        requirements
    }

    /// `NewNodeSelectorRequirements`.
    pub fn from_node_selector(terms: &[NodeSelectorRequirement]) -> Result<Self, RequirementError> {
        let mut requirements = Self::new();
        for term in terms {
            requirements.add(Requirement::new(
                &term.key,
                &term.operator,
                term.values.as_deref().unwrap_or_default(),
                None,
            )?);
        }
        Ok(requirements)
    }

    /// `NewStrictPodRequirements` for the `term`-th required node selector term: the pod's
    /// nodeSelector and that term's match expressions (Karpenter tries the terms one after the other,
    /// dropping the first while more remain). Preferences are not requirements here: Karpenter relaxes
    /// every one of them before it gives up on a pod.
    pub fn for_pod(pod: &Pod, term: usize) -> Result<Self, RequirementError> {
        let spec = pod.spec.as_ref();
        let mut requirements =
            Self::from_labels(spec.and_then(|s| s.node_selector.as_ref()).into_iter().flatten());
        if let Some(chosen) = required_terms(pod).get(term) {
            let expressions = chosen.match_expressions.as_deref().unwrap_or_default();
            requirements.add_all(&Self::from_node_selector(expressions)?);
        }
        Ok(requirements)
    }

    /// How many required node selector terms Karpenter would try for `pod` (at least one).
    pub fn pod_terms(pod: &Pod) -> usize {
        required_terms(pod).len().max(1)
    }

    /// `Compatible(incoming, AllowUndefinedWellKnownLabels)`: every key `incoming` needs a value of
    /// is defined here (or well known), and keys both define share a value.
    pub fn compatible(&self, incoming: &Requirements) -> Result<(), Incompatible> {
        for (key, requirement) in &incoming.0 {
            if WELL_KNOWN_LABELS.contains(&key.as_str()) {
                continue;
            }
            if self.has(key) || matches!(requirement.operator(), Operator::NotIn | Operator::DoesNotExist) {
                continue;
            }
            return Err(Incompatible::UnknownLabel {
                key: key.clone(),
                hint: self.label_hint(key),
            });
        }
        self.intersects(incoming)
    }

    /// `Intersects`: keys both define allow a common value (two exclusions always do).
    pub fn intersects(&self, incoming: &Requirements) -> Result<(), Incompatible> {
        let mut errors = Vec::new();
        for (key, existing) in &self.0 {
            let Some(incoming) = incoming.0.get(key) else {
                continue;
            };
            if existing.has_intersection(incoming) {
                continue;
            }
            let excluding = |op: Operator| matches!(op, Operator::NotIn | Operator::DoesNotExist);
            if excluding(incoming.operator()) && excluding(existing.operator()) {
                continue;
            }
            errors.push(format!("key {key}, {incoming} not in {existing}"));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Incompatible::NoCommonValue(errors))
        }
    }

    /// `labelHint`: a well-known or defined key the unknown `key` may be a typo of.
    fn label_hint(&self, key: &str) -> String {
        let suffix = key.split_once('/').map_or(key, |(_, after)| after);
        let looks_like = |candidate: &str| candidate.contains(key) || candidate.ends_with(suffix);
        let mut well_known: Vec<&str> = WELL_KNOWN_LABELS.to_vec();
        well_known.sort_unstable();
        well_known
            .into_iter()
            .chain(self.0.keys().map(String::as_str))
            .find(|candidate| looks_like(candidate))
            .map(|candidate| format!(" (typo of {candidate:?}?)"))
            .unwrap_or_default()
    }
}

impl fmt::Display for Requirements {
    /// `Requirements.String()`: sorted, without the restricted labels (the placeholder hostname).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown: Vec<String> = self
            .0
            .values()
            .filter(|r| !RESTRICTED_LABELS.contains(&r.key.as_str()))
            .map(ToString::to_string)
            .collect();
        shown.sort();
        f.write_str(&shown.join(", "))
    }
}

/// The pod's required node affinity terms (`requiredDuringSchedulingIgnoredDuringExecution`), none
/// when it has no required node affinity.
fn required_terms(pod: &Pod) -> &[k8s_openapi::api::core::v1::NodeSelectorTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> Requirement {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        Requirement::new(key, op, &values, None).expect("valid requirement")
    }

    fn reqs(list: &[Requirement]) -> Requirements {
        let mut requirements = Requirements::new();
        for r in list {
            requirements.add(r.clone());
        }
        requirements
    }

    #[test]
    fn display_reads_as_karpenter_prints() {
        let cases = [
            (
                req("kubernetes.io/arch", "In", &["arm64", "amd64"]),
                "kubernetes.io/arch In [amd64 arm64]",
            ),
            (req("team", "NotIn", &["b"]), "team NotIn [b]"),
            (req("team", "Exists", &[]), "team Exists"),
            (req("team", "DoesNotExist", &[]), "team DoesNotExist"),
            (req("cpu", "Gt", &["4"]), "cpu Exists >=5"),
            (req("cpu", "Lt", &["4"]), "cpu Exists <=3"),
            (
                req("t", "In", &["a", "b", "c", "d", "e", "f", "g"]),
                "t In [a b c d e and 2 others]",
            ),
        ];
        for (requirement, want) in cases {
            assert_eq!(requirement.to_string(), want);
        }
    }

    #[test]
    fn deprecated_keys_are_normalized() {
        assert_eq!(
            req("failure-domain.beta.kubernetes.io/zone", "In", &["a"]).key,
            "topology.kubernetes.io/zone"
        );
    }

    #[test]
    fn intersections_follow_set_algebra() {
        let cases = [
            (
                req("k", "In", &["a", "b"]),
                req("k", "In", &["b", "c"]),
                true,
                "k In [b]",
            ),
            (
                req("k", "In", &["a"]),
                req("k", "In", &["c"]),
                false,
                "k DoesNotExist",
            ),
            (
                req("k", "In", &["a", "b"]),
                req("k", "NotIn", &["a"]),
                true,
                "k In [b]",
            ),
            (
                req("k", "NotIn", &["a"]),
                req("k", "NotIn", &["b"]),
                true,
                "k NotIn [a b]",
            ),
            (
                req("k", "Exists", &[]),
                req("k", "DoesNotExist", &[]),
                false,
                "k DoesNotExist",
            ),
            (
                req("k", "Gt", &["4"]),
                req("k", "In", &["3", "8"]),
                true,
                "k In [8]",
            ),
            (
                req("k", "Gt", &["4"]),
                req("k", "Lt", &["3"]),
                false,
                "k DoesNotExist",
            ),
            (
                req("k", "Gt", &["1"]),
                req("k", "Lt", &["9"]),
                true,
                "k Exists >=2 <=8",
            ),
        ];
        for (a, b, intersects, merged) in cases {
            assert_eq!(a.has_intersection(&b), intersects, "{a} ∩ {b}");
            assert_eq!(a.intersection(&b).to_string(), merged, "{a} ∩ {b}");
        }
    }

    #[test]
    fn bad_operators_and_bounds_are_errors() {
        let values = vec!["x".to_owned()];
        assert!(matches!(
            Requirement::new("k", "Gt", &values, None),
            Err(RequirementError::NotAnInteger { .. })
        ));
        assert!(matches!(
            Requirement::new("k", "Near", &values, None),
            Err(RequirementError::UnknownOperator { .. })
        ));
    }

    #[test]
    fn compatible_reports_in_karpenters_words() {
        let pool = reqs(&[
            req(NODE_POOL_LABEL, "In", &["general"]),
            req("kubernetes.io/arch", "In", &["amd64"]),
            req("team", "In", &["ml"]),
        ]);
        let cases: [(Requirements, Result<(), Incompatible>); 5] = [
            (reqs(&[req("kubernetes.io/arch", "In", &["amd64"])]), Ok(())),
            // Well-known labels may be left open by the pool.
            (reqs(&[req("topology.kubernetes.io/zone", "In", &["z1"])]), Ok(())),
            // An exclusion of an undefined key holds.
            (reqs(&[req("gpu", "DoesNotExist", &[])]), Ok(())),
            (
                reqs(&[req("tier", "In", &["db"])]),
                Err(Incompatible::UnknownLabel {
                    key: "tier".into(),
                    hint: String::new(),
                }),
            ),
            (
                reqs(&[req("kubernetes.io/arch", "In", &["arm64"])]),
                Err(Incompatible::NoCommonValue(vec![
                    "key kubernetes.io/arch, kubernetes.io/arch In [arm64] not in kubernetes.io/arch In [amd64]"
                        .into(),
                ])),
            ),
        ];
        for (pod, want) in cases {
            assert_eq!(pool.compatible(&pod), want, "{pod}");
        }
        let typo = reqs(&[req("example.com/team", "In", &["ml"])]);
        assert_eq!(
            pool.compatible(&typo).unwrap_err().to_string(),
            "label \"example.com/team\" does not have known values (typo of \"team\"?)"
        );
    }

    #[test]
    fn printed_requirements_are_sorted_without_the_hostname() {
        let r = reqs(&[
            req("kubernetes.io/arch", "In", &["amd64"]),
            req(HOSTNAME_LABEL, "In", &["placeholder"]),
            req(CAPACITY_TYPE_LABEL, "In", &["on-demand"]),
        ]);
        assert_eq!(
            r.to_string(),
            "karpenter.sh/capacity-type In [on-demand], kubernetes.io/arch In [amd64]"
        );
    }
}
