//! PodDisruptionBudget accounting for victim selection: which victims would violate a budget if they
//! were preempted (Go's `FilterVictimsWithPDBViolation`).
//!
//! Budgets are read from `status.disruptionsAllowed` as the disruption controller last wrote it; pods in
//! `status.disruptedPods` were already counted by the API server and do not use up budget again.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::features::FeatureGates;
use crate::labels::Selector;
use crate::snapshot::PodInfo;

/// A PDB parsed once per preemption attempt.
#[derive(Debug, Clone)]
pub struct PdbInfo {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name` (for reports).
    pub name: String,
    /// The selector; `None` when it is nil, empty or invalid: such a PDB matches no pod.
    selector: Option<Selector>,
    /// `status.disruptionsAllowed` (0 when the status is missing).
    pub disruptions_allowed: i32,
    /// Names of the pods in `status.disruptedPods`.
    disrupted_pods: HashSet<String>,
}

impl PdbInfo {
    /// Parses a PDB.
    pub fn new(pdb: &PodDisruptionBudget) -> Self {
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| Selector::from_label_selector(Some(s)).ok())
            // An empty selector would match every pod; kube-scheduler treats it as matching none.
            .filter(|s| !s.is_everything() && !s.is_nothing());
        let status = pdb.status.as_ref();
        PdbInfo {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector,
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted_pods: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// True when this PDB covers the pod and the pod's eviction was not already processed.
    fn charges(&self, pod: &PodInfo) -> bool {
        let Some(selector) = &self.selector else {
            return false;
        };
        self.namespace == pod.namespace()
            && pod.labels().is_some_and(|l| selector.matches(l))
            && !self.disrupted_pods.contains(pod.name())
    }
}

/// The PDBs of a preemption attempt, indexed by namespace (a PDB only covers pods of its namespace, and
/// large clusters have thousands of PDBs).
#[derive(Debug, Clone, Default)]
pub struct PdbIndex {
    pdbs: Vec<PdbInfo>,
    by_namespace: HashMap<String, Vec<usize>>,
}

impl PdbIndex {
    /// Indexes parsed PDBs, keeping their order within each namespace.
    pub fn new(pdbs: Vec<PdbInfo>) -> Self {
        let mut by_namespace: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, p) in pdbs.iter().enumerate() {
            by_namespace.entry(p.namespace.clone()).or_default().push(i);
        }
        PdbIndex { pdbs, by_namespace }
    }

    /// Parses and indexes the PDBs of a snapshot.
    pub fn from_objects(pdbs: &[std::sync::Arc<PodDisruptionBudget>]) -> Self {
        Self::new(pdbs.iter().map(|p| PdbInfo::new(p)).collect())
    }

    /// Number of PDBs.
    pub fn len(&self) -> usize {
        self.pdbs.len()
    }

    /// True without PDBs.
    pub fn is_empty(&self) -> bool {
        self.pdbs.is_empty()
    }

    /// The PDBs whose selector matches the pod (whatever their budget): the ones an Eviction of the pod
    /// is checked against, to name in reports.
    pub fn covering<'a>(&'a self, pod: &'a PodInfo) -> impl Iterator<Item = &'a PdbInfo> + 'a {
        self.in_namespace(pod.namespace())
            .map(|(_, pdb)| pdb)
            .filter(move |pdb| {
                pdb.selector
                    .as_ref()
                    .is_some_and(|s| pod.labels().is_some_and(|l| s.matches(l)))
            })
    }

    /// The PDBs covering a namespace, in order.
    fn in_namespace(&self, namespace: &str) -> impl Iterator<Item = (usize, &PdbInfo)> {
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flatten()
            .map(|&i| (i, &self.pdbs[i]))
    }
}

/// True when the Eviction API evicts the pod without consulting its PodDisruptionBudgets (kube-apiserver's
/// `canIgnorePDB`): it is Pending, Succeeded or Failed, or already terminating. kube-scheduler's
/// accounting still counts such a victim as a violation; only `--mode=evict`'s outcome differs.
pub fn eviction_ignores_pdbs(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        || matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending" | "Succeeded" | "Failed")
        )
}

/// How a victim charges the budgets that cover it: the one accounting difference between releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetCharging {
    /// Every matching budget is charged, even after one went below zero (v1.33–v1.36's
    /// `filterPodsWithPDBViolation`).
    EveryBudget,
    /// Charging stops at the first budget the victim drives below zero (v1.37's
    /// `FilterVictimsWithPDBViolation` returns there): later budgets keep their disruption for the
    /// next victims.
    UntilFirstViolation,
}

impl BudgetCharging {
    /// The charging of the release whose code `features` describe.
    pub fn of(features: &FeatureGates) -> Self {
        if features.changes.pdb_violation_stops_at_first_budget {
            BudgetCharging::UntilFirstViolation
        } else {
            BudgetCharging::EveryBudget
        }
    }
}

/// Splits victims (in the given order) into those whose preemption would violate a PDB and the others.
///
/// Every victim charges the budgets it matches, in order, so the first victims of a budget are
/// non-violating and later ones violating. With [`BudgetCharging::UntilFirstViolation`] a pod stops
/// at the first budget it drives below zero (later budgets are not charged for it); with
/// [`BudgetCharging::EveryBudget`] it charges them all, so with a pod covered by two budgets the
/// releases can classify the next victims differently.
pub fn split_by_violation<T>(
    victims: Vec<T>,
    pod_of: impl Fn(&T) -> &PodInfo,
    pdbs: &PdbIndex,
    charging: BudgetCharging,
) -> (Vec<T>, Vec<T>) {
    let (violating, non_violating) = split_units_by_violation(victims, |v| vec![pod_of(v)], pdbs, charging);
    (violating.into_iter().map(|(v, _)| v).collect(), non_violating)
}

/// [`split_by_violation`] for victims of several pods (a pod group preempted as a whole): a victim
/// violates when any of its pods does (it is preempted whole or not at all), and comes with the
/// number of its pods that do.
pub fn split_units_by_violation<T>(
    victims: Vec<T>,
    pods_of: impl for<'a> Fn(&'a T) -> Vec<&'a PodInfo>,
    pdbs: &PdbIndex,
    charging: BudgetCharging,
) -> (Vec<(T, usize)>, Vec<T>) {
    // Remaining budget of the PDBs charged so far (few per node, so a list beats a map).
    let mut charged: Vec<(usize, i64)> = Vec::new();
    let mut violating = Vec::new();
    let mut non_violating = Vec::new();
    for v in victims {
        let mut violating_pods = 0;
        for pod in pods_of(&v) {
            if charge(pod, pdbs, charging, &mut charged) {
                violating_pods += 1;
            }
        }
        if violating_pods > 0 {
            violating.push((v, violating_pods));
        } else {
            non_violating.push(v);
        }
    }
    (violating, non_violating)
}

/// Charges the budgets covering `pod`; true when one goes below zero.
fn charge(pod: &PodInfo, pdbs: &PdbIndex, charging: BudgetCharging, charged: &mut Vec<(usize, i64)>) -> bool {
    let mut violates = false;
    if pod.labels().is_none_or(|l| l.is_empty()) {
        return false;
    }
    for (i, pdb) in pdbs.in_namespace(pod.namespace()) {
        if !pdb.charges(pod) {
            continue;
        }
        let left = match charged.iter_mut().find(|(j, _)| *j == i) {
            Some((_, left)) => left,
            None => {
                charged.push((i, i64::from(pdb.disruptions_allowed)));
                &mut charged.last_mut().expect("just pushed").1
            }
        };
        *left -= 1;
        if *left < 0 {
            violates = true;
            if charging == BudgetCharging::UntilFirstViolation {
                break;
            }
        }
    }
    violates
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::features::KubeVersion;
    use crate::testing::{pdb, pod};

    fn names(v: &[PodInfo]) -> Vec<&str> {
        v.iter().map(|p| p.name()).collect()
    }

    #[test]
    fn split_counts_budgets() {
        let a = || pod("a").label("app", "x").info();
        let b = || pod("b").label("app", "x").info();
        let c = || pod("c").label("app", "x").info();
        let other_ns = || pod("d").namespace("other").label("app", "x").info();
        let unlabeled = || pod("e").info();
        type Case<'a> = (&'a str, Vec<PdbInfo>, Vec<PodInfo>, Vec<&'a str>, Vec<&'a str>);
        let cases: Vec<Case<'_>> = vec![
            ("no pdbs", vec![], vec![a(), b()], vec![], vec!["a", "b"]),
            (
                "budget 1: first pod uses it, second violates",
                vec![PdbInfo::new(&pdb("p").selector("app", "x").allowed(1).obj())],
                vec![a(), b(), c()],
                vec!["b", "c"],
                vec!["a"],
            ),
            (
                "budget 0: every matching pod violates",
                vec![PdbInfo::new(&pdb("p").selector("app", "x").allowed(0).obj())],
                vec![a(), b()],
                vec!["a", "b"],
                vec![],
            ),
            (
                "pods in disruptedPods are not charged",
                vec![PdbInfo::new(
                    &pdb("p").selector("app", "x").allowed(0).disrupted("a").obj(),
                )],
                vec![a(), b()],
                vec!["b"],
                vec!["a"],
            ),
            (
                "a disrupted pod does not use up budget for the next one",
                vec![PdbInfo::new(
                    &pdb("p").selector("app", "x").allowed(1).disrupted("a").obj(),
                )],
                vec![a(), b(), c()],
                vec!["c"],
                vec!["a", "b"],
            ),
            (
                "other namespace is not covered",
                vec![PdbInfo::new(&pdb("p").selector("app", "x").allowed(0).obj())],
                vec![other_ns()],
                vec![],
                vec!["d"],
            ),
            (
                "selector must match",
                vec![PdbInfo::new(&pdb("p").selector("app", "y").allowed(0).obj())],
                vec![a()],
                vec![],
                vec!["a"],
            ),
            (
                "empty selector matches nothing",
                vec![PdbInfo::new(&pdb("p").empty_selector().allowed(0).obj())],
                vec![a()],
                vec![],
                vec!["a"],
            ),
            (
                "nil selector matches nothing",
                vec![PdbInfo::new(&pdb("p").allowed(0).obj())],
                vec![a()],
                vec![],
                vec!["a"],
            ),
            (
                "unlabeled pods never violate",
                vec![PdbInfo::new(&pdb("p").empty_selector().allowed(0).obj())],
                vec![unlabeled()],
                vec![],
                vec!["e"],
            ),
            (
                "missing status means zero disruptions allowed",
                vec![PdbInfo::new(&pdb("p").selector("app", "x").no_status().obj())],
                vec![a()],
                vec!["a"],
                vec![],
            ),
        ];
        // One budget per pod: both releases' charging agree.
        for charging in [BudgetCharging::EveryBudget, BudgetCharging::UntilFirstViolation] {
            for (name, pdbs, victims, want_violating, want_ok) in cases.clone() {
                let (violating, ok) = split_by_violation(victims, |p| p, &PdbIndex::new(pdbs), charging);
                assert_eq!(names(&violating), want_violating, "{name} ({charging:?})");
                assert_eq!(names(&ok), want_ok, "{name} ({charging:?})");
            }
        }
    }

    #[test]
    fn eviction_ignores_pdbs_as_kube_apiserver_does() {
        let cases = [
            ("running", Some("Running"), false, false),
            ("no phase", None, false, false),
            ("unknown", Some("Unknown"), false, false),
            ("pending", Some("Pending"), false, true),
            ("succeeded", Some("Succeeded"), false, true),
            ("failed", Some("Failed"), false, true),
            ("terminating", Some("Running"), true, true),
        ];
        for (name, phase, terminating, ignored) in cases {
            let mut p = pod("p");
            if terminating {
                p = p.terminating();
            }
            let mut p = p.obj();
            p.status.get_or_insert_with(Default::default).phase = phase.map(str::to_string);
            assert_eq!(eviction_ignores_pdbs(&p), ignored, "{name}");
        }
    }

    #[test]
    fn a_violating_pod_charges_later_budgets_only_before_v1_37() {
        // Pod a is covered by p1 (no disruption left) and p2 (one left); pod b by p2 only. v1.37
        // stops charging a at the first budget it exceeds, so in the order (p1, p2) p2 keeps its
        // disruption for b; v1.33–v1.36 charge p2 for a too, and b then violates it. In the order
        // (p2, p1) a uses up p2 before exceeding p1 in every release.
        let v1_36 = BudgetCharging::of(&FeatureGates::for_version(KubeVersion::new(36, 3)));
        let v1_37 = BudgetCharging::of(&FeatureGates::for_version(KubeVersion::new(37, 1)));
        assert_eq!(
            (v1_36, v1_37),
            (BudgetCharging::EveryBudget, BudgetCharging::UntilFirstViolation)
        );
        let p1 = || Arc::new(pdb("p1").selector("tier", "y").allowed(0).obj());
        let p2 = || Arc::new(pdb("p2").selector("app", "x").allowed(1).obj());
        type Case<'a> = (
            &'a str,
            Vec<Arc<PodDisruptionBudget>>,
            BudgetCharging,
            Vec<&'a str>,
            Vec<&'a str>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "v1.37, p1 first: b keeps p2",
                vec![p1(), p2()],
                v1_37,
                vec!["a"],
                vec!["b"],
            ),
            (
                "v1.36, p1 first: a charges p2 too",
                vec![p1(), p2()],
                v1_36,
                vec!["a", "b"],
                vec![],
            ),
            ("v1.37, p2 first", vec![p2(), p1()], v1_37, vec!["a", "b"], vec![]),
            ("v1.36, p2 first", vec![p2(), p1()], v1_36, vec!["a", "b"], vec![]),
        ];
        for (name, pdbs, charging, want_violating, want_ok) in cases {
            let (violating, ok) = split_by_violation(
                vec![
                    pod("a").label("app", "x").label("tier", "y").info(),
                    pod("b").label("app", "x").info(),
                ],
                |p| p,
                &PdbIndex::from_objects(&pdbs),
                charging,
            );
            assert_eq!(names(&violating), want_violating, "{name}");
            assert_eq!(names(&ok), want_ok, "{name}");
        }
    }
}
