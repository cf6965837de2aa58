//! Label selectors and node selectors, with apimachinery's matching rules.
//!
//! `LabelSelector` (matchLabels + matchExpressions In/NotIn/Exists/DoesNotExist) selects pods and
//! namespaces; `NodeSelectorTerm` (matchExpressions with Gt/Lt, matchFields on `metadata.name`) selects
//! nodes. Parsing happens once (per pod, in PreFilter); matching is allocation-free.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Labels of an object.
pub type Labels = BTreeMap<String, String>;

/// Why a selector is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// An operator apimachinery does not know.
    #[error("{0:?} is not a valid label selector operator")]
    UnknownOperator(String),
    /// In/NotIn need values; Exists/DoesNotExist take none; Gt/Lt need one integer.
    #[error("invalid values for operator {operator}: {values:?}")]
    BadValues {
        /// The operator.
        operator: String,
        /// The values given.
        values: Vec<String>,
    },
}

/// One parsed requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// key in values.
    In(String, Vec<String>),
    /// key not in values (or key absent).
    NotIn(String, Vec<String>),
    /// key present.
    Exists(String),
    /// key absent.
    DoesNotExist(String),
    /// key's integer value > n (node selectors only).
    Gt(String, i64),
    /// key's integer value < n (node selectors only).
    Lt(String, i64),
}

impl Requirement {
    fn parse(key: &str, operator: &str, values: Option<&Vec<String>>) -> Result<Self, SelectorError> {
        let values = values.cloned().unwrap_or_default();
        let bad = |values: Vec<String>| SelectorError::BadValues {
            operator: operator.to_string(),
            values,
        };
        let key = key.to_string();
        match operator {
            "In" | "NotIn" if values.is_empty() => Err(bad(values)),
            "In" => Ok(Requirement::In(key, values)),
            "NotIn" => Ok(Requirement::NotIn(key, values)),
            "Exists" | "DoesNotExist" if !values.is_empty() => Err(bad(values)),
            "Exists" => Ok(Requirement::Exists(key)),
            "DoesNotExist" => Ok(Requirement::DoesNotExist(key)),
            "Gt" | "Lt" => {
                let [v] = values.as_slice() else {
                    return Err(bad(values));
                };
                let n: i64 = v.parse().map_err(|_| bad(values.clone()))?;
                Ok(if operator == "Gt" {
                    Requirement::Gt(key, n)
                } else {
                    Requirement::Lt(key, n)
                })
            }
            other => Err(SelectorError::UnknownOperator(other.to_string())),
        }
    }

    /// Whether `labels` satisfy the requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::Gt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::Lt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// A parsed label selector. `Nothing` matches no object (a nil `*LabelSelector` converted by
/// `LabelSelectorAsSelector`); an empty requirement list matches everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Matches nothing.
    Nothing,
    /// Matches objects satisfying all requirements (none = everything).
    Requirements(Vec<Requirement>),
}

impl Selector {
    /// `metav1.LabelSelectorAsSelector`: `None` → Nothing; empty → Everything.
    pub fn from_label_selector(selector: Option<&LabelSelector>) -> Result<Self, SelectorError> {
        let Some(selector) = selector else {
            return Ok(Selector::Nothing);
        };
        let mut reqs = Vec::new();
        for (k, v) in selector.match_labels.iter().flatten() {
            reqs.push(Requirement::In(k.clone(), vec![v.clone()]));
        }
        for LabelSelectorRequirement {
            key,
            operator,
            values,
        } in selector.match_expressions.iter().flatten()
        {
            if operator == "Gt" || operator == "Lt" {
                return Err(SelectorError::UnknownOperator(operator.clone()));
            }
            reqs.push(Requirement::parse(key, operator, values.as_ref())?);
        }
        Ok(Selector::Requirements(reqs))
    }

    /// `labels.SelectorFromSet` (a Service's or ReplicationController's selector). An empty map matches
    /// everything; callers for which an empty selector means "nothing" check emptiness themselves.
    pub fn from_map(map: &BTreeMap<String, String>) -> Self {
        Selector::Requirements(
            map.iter()
                .map(|(k, v)| Requirement::In(k.clone(), vec![v.clone()]))
                .collect(),
        )
    }

    /// Matches everything.
    pub fn everything() -> Self {
        Selector::Requirements(Vec::new())
    }

    /// True for the selector that matches everything.
    pub fn is_everything(&self) -> bool {
        matches!(self, Selector::Requirements(r) if r.is_empty())
    }

    /// True for the selector that matches nothing.
    pub fn is_nothing(&self) -> bool {
        matches!(self, Selector::Nothing)
    }

    /// Whether the labels match.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Requirements(reqs) => reqs.iter().all(|r| r.matches(labels)),
        }
    }

    /// Matches optional labels (absent = empty).
    pub fn matches_opt(&self, labels: Option<&Labels>) -> bool {
        static EMPTY: Labels = BTreeMap::new();
        self.matches(labels.unwrap_or(&EMPTY))
    }
}

/// A parsed node selector term: label requirements and `metadata.name` field requirements, ANDed.
/// A term with no requirements at all matches no node (as in component-helpers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelectorTermMatcher {
    /// Requirements on node labels.
    pub labels: Vec<Requirement>,
    /// Requirements on node fields (`metadata.name` only).
    pub fields: Vec<Requirement>,
}

impl NodeSelectorTermMatcher {
    /// Parses a term.
    pub fn parse(term: &NodeSelectorTerm) -> Result<Self, SelectorError> {
        let parse_all = |reqs: Option<&Vec<NodeSelectorRequirement>>| {
            reqs.into_iter()
                .flatten()
                .map(|r| Requirement::parse(&r.key, &r.operator, r.values.as_ref()))
                .collect::<Result<Vec<_>, _>>()
        };
        let labels = parse_all(term.match_expressions.as_ref())?;
        let fields = parse_all(term.match_fields.as_ref())?;
        for f in &fields {
            // Only metadata.name is a supported node field, and only In/NotIn with one value.
            let (Requirement::In(k, v) | Requirement::NotIn(k, v)) = f else {
                return Err(SelectorError::UnknownOperator(format!("{f:?}")));
            };
            if k != "metadata.name" || v.len() != 1 {
                return Err(SelectorError::BadValues {
                    operator: k.clone(),
                    values: v.clone(),
                });
            }
        }
        Ok(NodeSelectorTermMatcher { labels, fields })
    }

    /// Whether a node with these labels and name matches.
    pub fn matches(&self, node_labels: &Labels, node_name: &str) -> bool {
        if self.labels.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.labels.iter().all(|r| r.matches(node_labels))
            && self.fields.iter().all(|r| match r {
                Requirement::In(_, v) => v.iter().any(|n| n == node_name),
                Requirement::NotIn(_, v) => v.iter().all(|n| n != node_name),
                _ => false,
            })
    }
}

/// A parsed `NodeSelector`: terms ORed. Invalid terms never match (component-helpers drops them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSelectorMatcher {
    terms: Vec<NodeSelectorTermMatcher>,
}

impl NodeSelectorMatcher {
    /// Parses a selector; terms that fail to parse are skipped (they match nothing), like
    /// `nodeaffinity.NewNodeSelector` with lenient parsing used by the scheduler.
    pub fn new(selector: &NodeSelector) -> Self {
        NodeSelectorMatcher {
            terms: selector
                .node_selector_terms
                .iter()
                .filter_map(|t| NodeSelectorTermMatcher::parse(t).ok())
                .collect(),
        }
    }

    /// Parses strictly: the first bad term is an error.
    pub fn parse(selector: &NodeSelector) -> Result<Self, SelectorError> {
        Ok(NodeSelectorMatcher {
            terms: selector
                .node_selector_terms
                .iter()
                .map(NodeSelectorTermMatcher::parse)
                .collect::<Result<_, _>>()?,
        })
    }

    /// The parsed terms.
    pub fn terms(&self) -> &[NodeSelectorTermMatcher] {
        &self.terms
    }

    /// Whether any term matches.
    pub fn matches(&self, node_labels: &Labels, node_name: &str) -> bool {
        self.terms.iter().any(|t| t.matches(node_labels, node_name))
    }
}

/// Why a `-l` selector string does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector {text:?}: {problem}")]
pub struct SelectorSyntaxError {
    /// The selector as given.
    pub text: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Splits at commas outside parentheses (`a in (x,y),b` is two requirements).
fn split_requirements(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    values.iter().all(|v| !v.is_empty()).then_some(values)
}

impl Selector {
    /// Parses kubectl's `-l` syntax: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`,
    /// comma-separated and ANDed. An empty string selects everything.
    pub fn parse(text: &str) -> Result<Self, SelectorSyntaxError> {
        let fail = |problem: &str| SelectorSyntaxError {
            text: text.to_string(),
            problem: problem.to_string(),
        };
        if text.trim().is_empty() {
            return Ok(Selector::everything());
        }
        let mut reqs = Vec::new();
        for part in split_requirements(text) {
            let part = part.trim();
            if part.is_empty() {
                return Err(fail("empty requirement"));
            }
            let key_ok =
                |k: &str| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
            let req = if let Some(key) = part.strip_prefix('!') {
                key_ok(key.trim()).then(|| Requirement::DoesNotExist(key.trim().to_string()))
            } else if let Some((k, v)) = part.split_once("!=") {
                key_ok(k.trim()).then(|| Requirement::NotIn(k.trim().to_string(), vec![v.trim().to_string()]))
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                key_ok(k.trim()).then(|| Requirement::In(k.trim().to_string(), vec![v.trim().to_string()]))
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                let values = set_values(rest).ok_or_else(|| fail("notin needs (v1,v2,...)"))?;
                key_ok(k.trim()).then(|| Requirement::NotIn(k.trim().to_string(), values))
            } else if let Some((k, rest)) = part.split_once(" in ") {
                let values = set_values(rest).ok_or_else(|| fail("in needs (v1,v2,...)"))?;
                key_ok(k.trim()).then(|| Requirement::In(k.trim().to_string(), values))
            } else {
                key_ok(part).then(|| Requirement::Exists(part.to_string()))
            };
            reqs.push(req.ok_or_else(|| fail(&format!("{part:?} is not a requirement")))?);
        }
        Ok(Selector::Requirements(reqs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn label_selector_semantics() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let cases: Vec<(&str, Option<LabelSelector>, bool)> = vec![
            ("nil selects nothing", None, false),
            ("empty selects everything", Some(LabelSelector::default()), true),
            (
                "matchLabels",
                Some(LabelSelector {
                    match_labels: Some([("app".to_string(), "web".to_string())].into()),
                    ..Default::default()
                }),
                true,
            ),
            (
                "In miss",
                Some(LabelSelector {
                    match_expressions: Some(vec![req("app", "In", &["db"])]),
                    ..Default::default()
                }),
                false,
            ),
            (
                "NotIn absent key matches",
                Some(LabelSelector {
                    match_expressions: Some(vec![req("zz", "NotIn", &["a"])]),
                    ..Default::default()
                }),
                true,
            ),
            (
                "Exists",
                Some(LabelSelector {
                    match_expressions: Some(vec![req("tier", "Exists", &[])]),
                    ..Default::default()
                }),
                true,
            ),
            (
                "DoesNotExist",
                Some(LabelSelector {
                    match_expressions: Some(vec![req("tier", "DoesNotExist", &[])]),
                    ..Default::default()
                }),
                false,
            ),
        ];
        for (name, sel, want) in cases {
            let s = Selector::from_label_selector(sel.as_ref()).unwrap();
            assert_eq!(s.matches(&l), want, "{name}");
        }
    }

    #[test]
    fn bad_operator_is_an_error() {
        let sel = LabelSelector {
            match_expressions: Some(vec![req("a", "Near", &["x"])]),
            ..Default::default()
        };
        assert!(Selector::from_label_selector(Some(&sel)).is_err());
    }

    #[test]
    fn node_selector_gt_lt_and_fields() {
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: "cores".into(),
                operator: "Gt".into(),
                values: Some(vec!["4".into()]),
            }]),
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec!["n1".into()]),
            }]),
        };
        let m = NodeSelectorTermMatcher::parse(&term).unwrap();
        assert!(m.matches(&labels(&[("cores", "8")]), "n1"));
        assert!(!m.matches(&labels(&[("cores", "8")]), "n2"));
        assert!(!m.matches(&labels(&[("cores", "4")]), "n1"));
        assert!(
            !NodeSelectorTermMatcher::parse(&NodeSelectorTerm::default())
                .unwrap()
                .matches(&labels(&[]), "n1")
        );
    }

    #[test]
    fn kubectl_selector_syntax_parses() {
        let labels: Labels = [("app", "web"), ("tier", "front")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (text, want) in [
            ("", true),
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app!=api", true),
            ("app", true),
            ("!app", false),
            ("!zone", true),
            ("tier in (front, back)", true),
            ("tier notin (front)", false),
            ("app=web,tier in (back)", false),
        ] {
            assert_eq!(Selector::parse(text).unwrap().matches(&labels), want, "{text}");
        }
        for bad in ["app=web,", "a in b", "x y", "=v", "tier in ()"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}
