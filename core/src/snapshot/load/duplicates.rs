//! One object per kind and name. `kubectl get` never prints an object twice, but two dumps
//! concatenated, or a hand-edited file, can: the engine would then count a node's capacity or a pod's
//! requests twice and explain a cluster that cannot exist. The first kind (in `ClusterObjects` order)
//! and name that appear more than once make the load fail, naming both copies by their place among
//! the objects of that kind.

use std::collections::HashMap;

use super::kind::ObjectKind;
use crate::snapshot::ClusterObjects;

/// An object that appears more than once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{kind} {name} appears twice (the {} and the {} {kind} read): a cluster holds one {kind} of a name; \
     remove one copy",
    ordinal(*first),
    ordinal(*second)
)]
pub struct Duplicate {
    /// The kind (`Node`).
    pub kind: &'static str,
    /// `namespace/name` or `name`.
    pub name: String,
    /// 0-based place of the first copy among the objects of that kind, in the order read.
    pub first: usize,
    /// 0-based place of the second copy.
    pub second: usize,
}

/// `1st`, `2nd`, `3rd`, `4th`, ..., `11th`, `21st` for a 0-based index.
fn ordinal(index: usize) -> String {
    let n = index + 1;
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The first object that has the same kind and name as an earlier one. Pods are counted whole ones
/// first, then those a compact load reduced, so with a compact load the places of pods are only
/// approximately the file's order.
pub(crate) fn check(objects: &ClusterObjects) -> Result<(), Duplicate> {
    for kind in ObjectKind::ALL {
        let names = kind.names(objects);
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            if let Some(first) = seen.insert(name.as_str(), i) {
                return Err(Duplicate {
                    kind: kind.kind(),
                    name: name.clone(),
                    first,
                    second: i,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(yaml_nodes: &[&str], pods: &[(&str, &str)]) -> ClusterObjects {
        ClusterObjects {
            nodes: yaml_nodes
                .iter()
                .map(|n| serde_json::from_value(serde_json::json!({"metadata": {"name": n}})).unwrap())
                .collect(),
            pods: pods
                .iter()
                .map(|(ns, n)| {
                    serde_json::from_value(serde_json::json!({"metadata": {"namespace": ns, "name": n}}))
                        .unwrap()
                })
                .collect(),
            ..ClusterObjects::default()
        }
    }

    #[test]
    fn the_first_repeated_name_is_an_error_naming_both_copies() {
        let cases = [
            ("distinct", objects(&["a", "b"], &[("x", "p"), ("y", "p")]), None),
            (
                "node twice",
                objects(&["a", "b", "a"], &[]),
                Some(
                    "Node a appears twice (the 1st and the 3rd Node read): a cluster holds one Node of a name; remove one copy",
                ),
            ),
            (
                "pod twice in one namespace",
                objects(&["a"], &[("x", "p"), ("y", "q"), ("x", "p")]),
                Some(
                    "Pod x/p appears twice (the 1st and the 3rd Pod read): a cluster holds one Pod of a name; remove one copy",
                ),
            ),
        ];
        for (case, objects, want) in cases {
            assert_eq!(
                check(&objects).err().map(|e| e.to_string()).as_deref(),
                want,
                "{case}"
            );
        }
    }

    #[test]
    fn ordinals_read_as_english() {
        let got: Vec<String> = [0, 1, 2, 3, 10, 11, 12, 20, 21, 100, 110].map(ordinal).to_vec();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"
            ]
        );
    }
}
