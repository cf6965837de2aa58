//! Claim constraints (`matchAttributeConstraint` in `allocator_incubating.go`,
//! `distinctAttributeConstraint` in `constraint.go`): every device picked for the named requests
//! must have the same value of an attribute, or pairwise different values.
//!
//! Constraints are monotonic: once `add` refuses a device, adding more devices cannot make it
//! accept, so the search backtracks right away. Every successful `add` is undone by exactly one
//! `remove` with the same arguments.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::resource::v1::DeviceAttribute;

/// An attribute value as constraints compare it. List attributes (DRAListTypeAttributes, off in
/// v1.37) are an unknown type here: they never satisfy a constraint, as upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    String(String),
    Int(i64),
    Bool(bool),
    Version(String),
    Unknown,
}

impl Value {
    fn of(attribute: &DeviceAttribute) -> Value {
        if let Some(s) = &attribute.string {
            Value::String(s.clone())
        } else if let Some(i) = attribute.int {
            Value::Int(i)
        } else if let Some(b) = attribute.bool {
            Value::Bool(b)
        } else if let Some(v) = &attribute.version {
            Value::Version(v.clone())
        } else {
            Value::Unknown
        }
    }
}

/// `lookupAttribute`: the attribute by fully-qualified name, or by its unqualified name when the
/// domain is the device's driver.
fn lookup_attribute<'d>(
    attributes: Option<&'d BTreeMap<String, DeviceAttribute>>,
    driver: &str,
    name: &str,
) -> Option<&'d DeviceAttribute> {
    let attributes = attributes?;
    if let Some(a) = attributes.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    attributes.get(id)
}

/// What a constraint requires.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// All devices share the first device's value; only the count is tracked after that.
    Match {
        first: Option<Value>,
        num_devices: usize,
    },
    /// Values pairwise different; the values of the devices added so far, in order.
    Distinct { values: Vec<Value> },
}

/// One claim constraint during a search.
#[derive(Debug, Clone)]
pub struct Constraint {
    /// `requests`: the request (or `request/subrequest`) names it applies to; empty = all.
    requests: HashSet<String>,
    /// The fully-qualified attribute name.
    attribute: String,
    kind: Kind,
}

impl Constraint {
    /// A `matchAttribute` constraint.
    pub fn match_attribute(requests: &[String], attribute: &str) -> Self {
        Constraint {
            requests: requests.iter().cloned().collect(),
            attribute: attribute.to_string(),
            kind: Kind::Match {
                first: None,
                num_devices: 0,
            },
        }
    }

    /// A `distinctAttribute` constraint.
    pub fn distinct_attribute(requests: &[String], attribute: &str) -> Self {
        Constraint {
            requests: requests.iter().cloned().collect(),
            attribute: attribute.to_string(),
            kind: Kind::Distinct { values: Vec::new() },
        }
    }

    /// Whether the constraint applies to a device picked for `request` (and `sub_request`, empty
    /// when the request has none).
    fn applies(&self, request: &str, sub_request: &str) -> bool {
        if self.requests.is_empty() {
            return true;
        }
        self.requests.contains(request)
            || (!sub_request.is_empty() && self.requests.contains(&format!("{request}/{sub_request}")))
    }

    /// `add`: whether the device may be picked; if so it is counted.
    pub fn add(
        &mut self,
        request: &str,
        sub_request: &str,
        attributes: Option<&BTreeMap<String, DeviceAttribute>>,
        driver: &str,
    ) -> bool {
        if !self.applies(request, sub_request) {
            return true;
        }
        let Some(attribute) = lookup_attribute(attributes, driver, &self.attribute) else {
            return false;
        };
        let value = Value::of(attribute);
        match &mut self.kind {
            Kind::Match { first, num_devices } => {
                if *num_devices == 0 {
                    *first = Some(value);
                    *num_devices = 1;
                    return true;
                }
                if value == Value::Unknown || first.as_ref() != Some(&value) {
                    return false;
                }
                *num_devices += 1;
                true
            }
            Kind::Distinct { values } => {
                // An unknown type is refused only when there is something to compare with.
                if (value == Value::Unknown && !values.is_empty()) || values.contains(&value) {
                    return false;
                }
                values.push(value);
                true
            }
        }
    }

    /// `remove`: undoes the matching successful `add`.
    pub fn remove(&mut self, request: &str, sub_request: &str) {
        if !self.applies(request, sub_request) {
            return;
        }
        match &mut self.kind {
            Kind::Match { num_devices, .. } => *num_devices = num_devices.saturating_sub(1),
            Kind::Distinct { values } => {
                values.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, DeviceAttribute)]) -> BTreeMap<String, DeviceAttribute> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn s(v: &str) -> DeviceAttribute {
        DeviceAttribute {
            string: Some(v.into()),
            ..Default::default()
        }
    }

    #[test]
    fn match_attribute() {
        let mut c = Constraint::match_attribute(&[], "drv.example.com/model");
        let a = attrs(&[("model", s("a"))]);
        let b = attrs(&[("drv.example.com/model", s("b"))]);
        assert!(c.add("r", "", Some(&a), "drv.example.com"));
        assert!(!c.add("r", "", Some(&b), "drv.example.com"));
        assert!(
            !c.add("r", "", Some(&a), "other.example.com"),
            "unqualified name of another driver"
        );
        c.remove("r", "");
        assert!(
            c.add("r", "", Some(&b), "drv.example.com"),
            "empty again: anything goes"
        );
        let mut only = Constraint::match_attribute(&["p".into()], "x.example.com/model");
        assert!(only.add("q", "", None, "x.example.com"), "request not named");
        assert!(!only.add("p", "s", None, "x.example.com"), "no attribute");
        let mut sub = Constraint::match_attribute(&["p/s".into()], "x.example.com/model");
        assert!(!sub.add("p", "s", None, "x.example.com"));
        assert!(sub.add("p", "t", None, "x.example.com"));
    }

    #[test]
    fn distinct_attribute() {
        let mut c = Constraint::distinct_attribute(&[], "d.example.com/id");
        let one = attrs(&[(
            "id",
            DeviceAttribute {
                int: Some(1),
                ..Default::default()
            },
        )]);
        let two = attrs(&[(
            "id",
            DeviceAttribute {
                int: Some(2),
                ..Default::default()
            },
        )]);
        assert!(c.add("r", "", Some(&one), "d.example.com"));
        assert!(!c.add("r", "", Some(&one), "d.example.com"));
        assert!(c.add("r", "", Some(&two), "d.example.com"));
        c.remove("r", "");
        c.remove("r", "");
        assert!(c.add("r", "", Some(&one), "d.example.com"));
        let list = attrs(&[(
            "id",
            DeviceAttribute {
                ints: Some(vec![1]),
                ..Default::default()
            },
        )]);
        assert!(
            !c.add("r", "", Some(&list), "d.example.com"),
            "list values are unknown"
        );
    }
}
