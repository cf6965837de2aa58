//! Consumable capacity (`consumable_capacity.go`): how much of a device's capacity a request
//! consumes under the device's request policy (default, valid range with step, valid values), and
//! whether it still fits next to what is allocated and being allocated.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, CapacityRequirements, DeviceCapacity,
};

use super::quantity::ExactQuantity;
use super::state::ConsumedCapacity;

/// Why a capacity request cannot be evaluated; it aborts the allocation (a fatal error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapacityError {
    /// `errCapacityRequestNotRepresentable`, with the detail upstream appends.
    #[error(
        "capacity {name:?}: capacity request cannot be represented in the device's range arithmetic: {detail}"
    )]
    NotRepresentable {
        /// The capacity's name.
        name: String,
        /// What could not be represented.
        detail: String,
    },
    /// `errNegativeCapacity`.
    #[error("capacity {name:?}: capacity value is negative")]
    Negative {
        /// The capacity's name.
        name: String,
    },
}

/// A quantity from the API.
fn q(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> ExactQuantity {
    ExactQuantity::from_quantity(q)
}

/// The requested amount of capacity `name`, if the request names it.
fn requested(request: Option<&CapacityRequirements>, name: &str) -> Option<ExactQuantity> {
    request?.requests.as_ref()?.get(name).map(q)
}

/// `CmpRequestOverCapacity`: whether the request fits on a device with `capacity`, given what is
/// `current`ly consumed by allocated claims and what is being `allocating` in this search.
/// `Ok(false)` skips the device; an error aborts the allocation.
pub fn cmp_request_over_capacity(
    current: Option<&ConsumedCapacity>,
    request: Option<&CapacityRequirements>,
    capacity: Option<&BTreeMap<String, DeviceCapacity>>,
    allocating: Option<&ConsumedCapacity>,
    fractional: bool,
) -> Result<bool, CapacityError> {
    let empty = BTreeMap::new();
    let capacity = capacity.unwrap_or(&empty);
    if let Some(requests) = request.and_then(|r| r.requests.as_ref())
        && requests.keys().any(|name| !capacity.contains_key(name))
    {
        // The device does not define a requested capacity: skip it.
        return Ok(false);
    }
    // Resolve every capacity first, so an unrepresentable request aborts whatever the order.
    let mut consumed = BTreeMap::new();
    for (name, cap) in capacity {
        let c = calculate_consumed_capacity(name, requested(request, name), cap, fractional)?;
        if c.signum() < 0 {
            return Err(CapacityError::Negative { name: name.clone() });
        }
        consumed.insert(name, c);
    }
    for (name, cap) in capacity {
        let Some(c) = consumed.get(name).copied() else {
            continue;
        };
        if violates_policy(&c, cap.request_policy.as_ref(), fractional) {
            return Ok(false);
        }
        let mut total = current
            .and_then(|cur| cur.get(name))
            .copied()
            .unwrap_or(ExactQuantity::ZERO);
        total.add(&c);
        if let Some(a) = allocating.and_then(|a| a.get(name)) {
            total.add(a);
        }
        if total > q(&cap.value) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `GetConsumedCapacityFromRequest`: the capacity a request consumes on a device, per capacity.
pub fn consumed_capacity_from_request(
    request: Option<&CapacityRequirements>,
    capacity: Option<&BTreeMap<String, DeviceCapacity>>,
    fractional: bool,
) -> Result<ConsumedCapacity, CapacityError> {
    let mut consumed = ConsumedCapacity::new();
    for (name, cap) in capacity.into_iter().flatten() {
        let c = calculate_consumed_capacity(name, requested(request, name), cap, fractional)?;
        consumed.insert(name.clone(), c);
    }
    Ok(consumed)
}

/// `calculateConsumedCapacity`: the request as the policy rounds it up, or the policy's default
/// (else the whole capacity) when the request does not name this capacity.
fn calculate_consumed_capacity(
    name: &str,
    requested: Option<ExactQuantity>,
    capacity: &DeviceCapacity,
    fractional: bool,
) -> Result<ExactQuantity, CapacityError> {
    let Some(requested) = requested else {
        return Ok(fill_empty_request(capacity));
    };
    let Some(policy) = &capacity.request_policy else {
        return Ok(requested);
    };
    if let Some(range) = &policy.valid_range {
        return round_up_range(name, requested, range, fractional);
    }
    if let Some(values) = &policy.valid_values {
        return Ok(round_up_valid_values(requested, values));
    }
    Ok(requested)
}

/// `fillEmptyRequest`.
fn fill_empty_request(capacity: &DeviceCapacity) -> ExactQuantity {
    match capacity.request_policy.as_ref().and_then(|p| p.default.as_ref()) {
        Some(default) => q(default),
        None => q(&capacity.value),
    }
}

/// `roundUpRange`: at least `min`, then up to the next `min + n*step`.
fn round_up_range(
    name: &str,
    requested: ExactQuantity,
    range: &CapacityRequestPolicyRange,
    fractional: bool,
) -> Result<ExactQuantity, CapacityError> {
    let min = q(&range.min);
    if requested < min {
        return Ok(min);
    }
    let Some(step_q) = range.step.as_ref().map(q) else {
        return Ok(requested);
    };
    let format = step_q.format();
    let not_representable = |detail: String| CapacityError::NotRepresentable {
        name: name.to_string(),
        detail,
    };
    if use_milli(range, fractional) {
        let requested_milli = requested.exact_milli_value().ok_or_else(|| {
            not_representable(format!("request {requested} is not a representable milli value"))
        })?;
        let step = step_q.milli_value();
        let min = min.milli_value();
        let passes = || {
            not_representable(format!(
                "rounding request {requested} up to the next step passes the milli-value range"
            ))
        };
        let value = round_up_steps(requested_milli, min, step).ok_or_else(passes)?;
        if value % 1000 == 0 {
            return Ok(ExactQuantity::from_value(value / 1000, format));
        }
        return Ok(ExactQuantity::from_milli(value, format));
    }
    if requested.cmp_i64(i64::MAX).is_gt() {
        return Err(not_representable(format!("request {requested} exceeds MaxInt64")));
    }
    let value = round_up_steps(requested.value(), min.value(), step_q.value()).ok_or_else(|| {
        not_representable(format!(
            "rounding request {requested} up to the next step passes MaxInt64"
        ))
    })?;
    Ok(ExactQuantity::from_value(value, format))
}

/// `min + step * ceil((requested - min) / step)`, `None` when it does not fit `i64` (or the step
/// is not positive, which validation forbids and Go would crash on).
fn round_up_steps(requested: i64, min: i64, step: i64) -> Option<i64> {
    if step <= 0 {
        return None;
    }
    let added = requested.checked_sub(min)?;
    let mut n = added / step;
    if added % step != 0 {
        n += 1;
    }
    min.checked_add(step.checked_mul(n)?)
}

/// `roundUpValidValues`: the first valid value at least the request, else the request.
fn round_up_valid_values(
    requested: ExactQuantity,
    values: &[k8s_openapi::apimachinery::pkg::api::resource::Quantity],
) -> ExactQuantity {
    values
        .iter()
        .map(q)
        .find(|v| requested <= *v)
        .unwrap_or(requested)
}

/// `violatesPolicy`: a consumed amount the policy does not allow (the default always is).
fn violates_policy(
    requested: &ExactQuantity,
    policy: Option<&CapacityRequestPolicy>,
    fractional: bool,
) -> bool {
    let Some(policy) = policy else {
        return false;
    };
    if policy.default.as_ref().is_some_and(|d| q(d) == *requested) {
        return false;
    }
    if let Some(range) = &policy.valid_range {
        return violates_valid_range(requested, range, fractional);
    }
    if let Some(values) = policy.valid_values.as_ref().filter(|v| !v.is_empty()) {
        return !values.iter().any(|v| q(v) == *requested);
    }
    false
}

/// `violateValidRange`: above `max`, or not `min` plus a multiple of `step`.
fn violates_valid_range(
    requested: &ExactQuantity,
    range: &CapacityRequestPolicyRange,
    fractional: bool,
) -> bool {
    if range.max.as_ref().is_some_and(|max| *requested > q(max)) {
        return true;
    }
    let Some(step) = range.step.as_ref().map(q) else {
        return false;
    };
    let (requested, step, min) = if use_milli(range, fractional) {
        let Some(requested) = requested.exact_milli_value() else {
            return true;
        };
        (requested, step.milli_value(), q(&range.min).milli_value())
    } else {
        (requested.value(), step.value(), q(&range.min).value())
    };
    match requested.checked_sub(min).and_then(|d| d.checked_rem(step)) {
        Some(rem) => rem != 0,
        None => true,
    }
}

/// `useMilli`: milli-value arithmetic when the gate is on, min/max/step are exact milli values
/// and the step is at least `1m`.
fn use_milli(range: &CapacityRequestPolicyRange, fractional: bool) -> bool {
    if !fractional {
        return false;
    }
    if q(&range.min).exact_milli_value().is_none() {
        return false;
    }
    if range
        .max
        .as_ref()
        .is_some_and(|m| q(m).exact_milli_value().is_none())
    {
        return false;
    }
    match range.step.as_ref().map(|s| q(s).exact_milli_value()) {
        None => true,
        Some(None) => false,
        Some(Some(step)) => step >= 1,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    fn cap(value: &str, policy: Option<CapacityRequestPolicy>) -> DeviceCapacity {
        DeviceCapacity {
            value: Quantity(value.into()),
            request_policy: policy,
        }
    }

    fn range(min: &str, max: Option<&str>, step: Option<&str>) -> CapacityRequestPolicy {
        CapacityRequestPolicy {
            default: Some(Quantity(min.into())),
            valid_range: Some(CapacityRequestPolicyRange {
                min: Quantity(min.into()),
                max: max.map(|m| Quantity(m.into())),
                step: step.map(|s| Quantity(s.into())),
            }),
            valid_values: None,
        }
    }

    fn req(name: &str, v: &str) -> CapacityRequirements {
        CapacityRequirements {
            requests: Some([(name.to_string(), Quantity(v.into()))].into()),
        }
    }

    fn consumed(request: Option<&CapacityRequirements>, c: &DeviceCapacity) -> String {
        let caps: BTreeMap<String, DeviceCapacity> = [("mem".to_string(), c.clone())].into();
        consumed_capacity_from_request(request, Some(&caps), true).unwrap()["mem"].to_string()
    }

    #[test]
    fn policies_round_requests_up() {
        let stepped = cap("80Gi", Some(range("1Gi", Some("40Gi"), Some("1Gi"))));
        assert_eq!(consumed(Some(&req("mem", "1500Mi")), &stepped), "2Gi");
        assert_eq!(consumed(Some(&req("mem", "100Mi")), &stepped), "1Gi");
        assert_eq!(consumed(None, &stepped), "1Gi", "the default");
        let plain = cap("80Gi", None);
        assert_eq!(consumed(None, &plain), "80Gi", "the whole capacity");
        assert_eq!(consumed(Some(&req("mem", "3Gi")), &plain), "3Gi");
        let values = cap(
            "10",
            Some(CapacityRequestPolicy {
                default: None,
                valid_range: None,
                valid_values: Some(vec![Quantity("2".into()), Quantity("4".into())]),
            }),
        );
        assert_eq!(consumed(Some(&req("mem", "3")), &values), "4");
        assert_eq!(consumed(Some(&req("mem", "5")), &values), "5");
        let fractional = cap("1", Some(range("100m", None, Some("250m"))));
        assert_eq!(consumed(Some(&req("mem", "200m")), &fractional), "350m");
    }

    #[test]
    fn fits_checks_policy_and_totals() {
        let caps: BTreeMap<String, DeviceCapacity> = [(
            "mem".to_string(),
            cap("80Gi", Some(range("1Gi", Some("40Gi"), Some("1Gi")))),
        )]
        .into();
        let fits = |request: &str, current: &str| {
            let current: ConsumedCapacity =
                [("mem".to_string(), ExactQuantity::parse(current).unwrap())].into();
            cmp_request_over_capacity(
                Some(&current),
                Some(&req("mem", request)),
                Some(&caps),
                None,
                true,
            )
            .unwrap()
        };
        assert!(fits("10Gi", "70Gi"));
        assert!(!fits("10Gi", "71Gi"));
        assert!(!fits("41Gi", "0"), "above max");
        assert!(
            !cmp_request_over_capacity(None, Some(&req("other", "1")), Some(&caps), None, true).unwrap(),
            "unknown capacity"
        );
        let err = cmp_request_over_capacity(
            None,
            Some(&req("mem", "99999999999999999999999")),
            Some(&caps),
            None,
            true,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("capacity \"mem\": capacity request cannot be represented"),
            "{err}"
        );
    }
}
