//! Resource quantities (`500m`, `1Gi`, `1e3`) and the `Resource` vector kube-scheduler adds and
//! compares: milli-CPU, memory bytes, ephemeral-storage bytes, allowed pod count, and scalar (extended,
//! hugepages, attachable-volume) resources.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Serialize;

/// `cpu`.
pub const CPU: &str = "cpu";
/// `memory`.
pub const MEMORY: &str = "memory";
/// `ephemeral-storage`.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// `pods`.
pub const PODS: &str = "pods";

/// Why a quantity string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is not a Kubernetes quantity.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}"
    )]
    Malformed(String),
}

/// How a quantity is written (`resource.Format`); the DRA allocator's exact quantities keep the format
/// of the value they come from, like Go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QuantityFormat {
    /// `1k`, `500m`, `2M`.
    #[default]
    DecimalSI,
    /// `1Ki`, `80Gi`.
    BinarySI,
    /// `1e3`.
    DecimalExponent,
}

/// A quantity string split the way `resource.ParseQuantity` reads it: a sign, decimal digits, and
/// the suffix's multiplier `2^pow2 * 10^pow10`. The one quantity syntax of the engine: it feeds both
/// precisions, the int64 values requests and capacities use ([`parse_value`], [`parse_milli_value`],
/// rounded up exactly from the written fraction) and the DRA allocator's exact nano-unit quantities
/// (`dra::structured::quantity::ExactQuantity`, which rounds to a nano like Go's parser).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantityParts<'a> {
    /// A leading `-`.
    pub negative: bool,
    /// The digits before the decimal point (may be empty, as in `.5`).
    pub integer: &'a str,
    /// The digits after the decimal point (empty when there is none).
    pub fraction: &'a str,
    /// Binary suffixes (`Ki` = 10 ... `Ei` = 60).
    pub pow2: u32,
    /// Decimal suffixes (`n` = -9 ... `E` = 18) and exponents (`e3`).
    pub pow10: i32,
    /// The suffix's family.
    pub format: QuantityFormat,
}

impl<'a> QuantityParts<'a> {
    /// Splits `s` (surrounding whitespace ignored); `None` when it is not a quantity, or when its
    /// exponent (`1e<exp>`) lies outside `-max_exponent..=max_exponent`, the range the caller's
    /// arithmetic handles.
    pub fn split(s: &'a str, max_exponent: i32) -> Option<Self> {
        let s = s.trim();
        let (negative, rest) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let (integer, fraction) = number.split_once('.').unwrap_or((number, ""));
        let (pow2, pow10, format): (u32, i32, QuantityFormat) = match suffix {
            "" => (0, 0, QuantityFormat::DecimalSI),
            "Ki" => (10, 0, QuantityFormat::BinarySI),
            "Mi" => (20, 0, QuantityFormat::BinarySI),
            "Gi" => (30, 0, QuantityFormat::BinarySI),
            "Ti" => (40, 0, QuantityFormat::BinarySI),
            "Pi" => (50, 0, QuantityFormat::BinarySI),
            "Ei" => (60, 0, QuantityFormat::BinarySI),
            "n" => (0, -9, QuantityFormat::DecimalSI),
            "u" => (0, -6, QuantityFormat::DecimalSI),
            "m" => (0, -3, QuantityFormat::DecimalSI),
            "k" => (0, 3, QuantityFormat::DecimalSI),
            "M" => (0, 6, QuantityFormat::DecimalSI),
            "G" => (0, 9, QuantityFormat::DecimalSI),
            "T" => (0, 12, QuantityFormat::DecimalSI),
            "P" => (0, 15, QuantityFormat::DecimalSI),
            "E" => (0, 18, QuantityFormat::DecimalSI),
            _ => {
                let exp: i32 = suffix.strip_prefix(['e', 'E'])?.parse().ok()?;
                if !(-max_exponent..=max_exponent).contains(&exp) {
                    return None;
                }
                (0, exp, QuantityFormat::DecimalExponent)
            }
        };
        Some(QuantityParts {
            negative,
            integer,
            fraction,
            pow2,
            pow10,
            format,
        })
    }
}

/// The exponent range of the int64 precision: beyond 10^±100 every int64 result has saturated (or is
/// the smallest step), so larger exponents are rejected as malformed.
const MAX_EXPONENT: i32 = 100;

/// A parsed quantity as an exact fraction: `numerator / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Exact {
    negative: bool,
    numerator: i128,
    /// Power of ten in the denominator (may be negative: then it multiplies).
    scale: i32,
}

fn parse_exact(s: &str) -> Result<Exact, QuantityError> {
    let bad = || QuantityError::Malformed(s.to_string());
    let parts = QuantityParts::split(s, MAX_EXPONENT).ok_or_else(bad)?;
    let mut numerator: i128 = 0;
    let mut scale: i32 = 0;
    for c in parts.integer.chars().chain(parts.fraction.chars()) {
        // Precision beyond 30 significant digits cannot change an int64 result: keep the scale right.
        if numerator > 10_i128.pow(30) {
            scale -= 1;
            continue;
        }
        numerator = numerator * 10 + i128::from(c as u8 - b'0');
    }
    scale += parts.fraction.len() as i32;
    let (negative, mul_pow2, mul_pow10) = (parts.negative, parts.pow2, parts.pow10);
    // Up to 30 digits times 2^60 (Ei) does not fit in an i128: drop trailing digits until it does
    // (a relative change under 10^-19) instead of saturating, which turned a modest value such as
    // `2037.35110090000000207341010563903Gi` into a wrapped one (found by fuzzing).
    let multiplier = 1_i128 << mul_pow2;
    while numerator.checked_mul(multiplier).is_none() {
        numerator /= 10;
        scale -= 1;
    }
    numerator *= multiplier;
    Ok(Exact {
        negative,
        numerator,
        scale: scale - mul_pow10,
    })
}

/// Value of the quantity times `10^extra`, rounded up (away from zero for positives, like Go's
/// `Quantity.Value`/`MilliValue`), saturated to the i64 range.
fn scaled_ceil(q: Exact, extra: i32) -> i64 {
    let scale = q.scale - extra;
    let magnitude: i128 = if scale <= 0 {
        let mut v = q.numerator;
        for _ in 0..(-scale) {
            v = v.saturating_mul(10);
        }
        v
    } else if scale > 38 {
        // Under 10^-38 in magnitude: rounded up, a positive value is 1 and a negative one 0, as the
        // division below rounds them (found by fuzzing: `-1e-50` gave -1).
        i128::from(q.numerator != 0 && !q.negative)
    } else {
        let d = 10_i128.pow(scale as u32);
        // Rounded up without `numerator + d - 1`, which overflows near i128::MAX.
        q.numerator / d + i128::from(!q.negative && q.numerator % d != 0)
    };
    let signed = if q.negative { -magnitude } else { magnitude };
    signed.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Parses a quantity string into its integer value, rounded up (Go's `Quantity.Value()`).
pub fn parse_value(s: &str) -> Result<i64, QuantityError> {
    Ok(scaled_ceil(parse_exact(s)?, 0))
}

/// Parses a quantity string into thousandths, rounded up (Go's `Quantity.MilliValue()`).
pub fn parse_milli_value(s: &str) -> Result<i64, QuantityError> {
    Ok(scaled_ceil(parse_exact(s)?, 3))
}

/// `Quantity.Value()`; a malformed quantity (which the API server would have rejected) counts as 0.
pub fn quantity_value(q: &Quantity) -> i64 {
    parse_value(&q.0).unwrap_or(0)
}

/// `Quantity.MilliValue()`; a malformed quantity counts as 0.
pub fn quantity_milli_value(q: &Quantity) -> i64 {
    parse_milli_value(&q.0).unwrap_or(0)
}

/// A resource name's integer amount in the unit kube-scheduler uses: milli-units for cpu, units otherwise.
pub fn amount_of(name: &str, q: &Quantity) -> i64 {
    if name == CPU {
        quantity_milli_value(q)
    } else {
        quantity_value(q)
    }
}

/// Renders an amount back as a quantity string in the unit a user reads (cpu as `300m`, bytes with a
/// binary suffix when exact).
pub fn format_amount(name: &str, amount: i64) -> String {
    if name == CPU {
        if amount % 1000 == 0 {
            format!("{}", amount / 1000)
        } else {
            format!("{amount}m")
        }
    } else if name == MEMORY || name == EPHEMERAL_STORAGE || name.starts_with("hugepages-") {
        for (suffix, shift) in [
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ] {
            let unit = 1_i64 << shift;
            if amount != 0 && amount % unit == 0 {
                return format!("{}{}", amount / unit, suffix);
            }
        }
        amount.to_string()
    } else {
        amount.to_string()
    }
}

/// kube-scheduler's `framework.Resource`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Resource {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Pod count (only meaningful for allocatable).
    pub allowed_pod_number: i64,
    /// Extended resources, hugepages, attachable volumes.
    pub scalar_resources: BTreeMap<String, i64>,
}

impl Resource {
    /// Builds a resource from a ResourceList (e.g. a node's allocatable or a container's requests).
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Self {
        let mut r = Resource::default();
        r.add_list(list);
        r
    }

    /// Adds a ResourceList (Go's `Resource.Add`).
    pub fn add_list(&mut self, list: &BTreeMap<String, Quantity>) {
        for (name, q) in list {
            self.add_amount(name, amount_of(name, q));
        }
    }

    /// Adds an amount of one named resource. Sums saturate at the i64 range (Go's int64 would wrap):
    /// quantities near 2^63 only come from hand-written files, and must not end in an overflow.
    pub fn add_amount(&mut self, name: &str, amount: i64) {
        match name {
            CPU => self.milli_cpu = self.milli_cpu.saturating_add(amount),
            MEMORY => self.memory = self.memory.saturating_add(amount),
            EPHEMERAL_STORAGE => self.ephemeral_storage = self.ephemeral_storage.saturating_add(amount),
            PODS => self.allowed_pod_number = self.allowed_pod_number.saturating_add(amount),
            _ if is_scalar_resource_name(name) => {
                let sum = self.scalar_resources.entry(name.to_string()).or_insert(0);
                *sum = sum.saturating_add(amount);
            }
            _ => {}
        }
    }

    /// The amount of a named resource (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            _ => self.scalar_resources.get(name).copied().unwrap_or(0),
        }
    }

    /// Adds another resource, field by field (`sign` = 1 to add, -1 to subtract), saturating as
    /// [`Resource::add_amount`] does.
    pub fn add_resource(&mut self, other: &Resource, sign: i64) {
        let add = |sum: &mut i64, v: i64| *sum = sum.saturating_add(v.saturating_mul(sign));
        add(&mut self.milli_cpu, other.milli_cpu);
        add(&mut self.memory, other.memory);
        add(&mut self.ephemeral_storage, other.ephemeral_storage);
        add(&mut self.allowed_pod_number, other.allowed_pod_number);
        for (k, v) in &other.scalar_resources {
            add(self.scalar_resources.entry(k.clone()).or_insert(0), *v);
        }
    }

    /// True when every field is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar_resources.values().all(|v| *v == 0)
    }
}

/// `hugepages-*`.
pub fn is_hugepage_resource_name(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `attachable-volumes-*`.
pub fn is_attachable_volume_resource_name(name: &str) -> bool {
    name.starts_with("attachable-volumes-")
}

/// Go's `IsNativeResource`: no domain, or a `kubernetes.io/` domain.
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Go's `IsExtendedResourceName`: not native, not `requests.`-prefixed, valid qualified name.
pub fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with("requests.") {
        return false;
    }
    true
}

/// Go's `IsScalarResourceName`: extended, hugepages, prefixed native, or attachable volumes.
pub fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || is_hugepage_resource_name(name)
        || is_prefixed_native_resource(name)
        || is_attachable_volume_resource_name(name)
}

/// Go's `IsPrefixedNativeResource`: contains `kubernetes.io/`.
pub fn is_prefixed_native_resource(name: &str) -> bool {
    name.contains("kubernetes.io/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quantities_like_go() {
        for (s, value, milli) in [
            ("1", 1, 1000),
            ("500m", 1, 500),
            ("0.5", 1, 500),
            ("1.5", 2, 1500),
            ("100m", 1, 100),
            ("1Ki", 1024, 1_024_000),
            ("1Mi", 1 << 20, (1 << 20) * 1000),
            ("2Gi", 2 << 30, (2_i64 << 30) * 1000),
            ("1k", 1000, 1_000_000),
            ("1M", 1_000_000, 1_000_000_000),
            ("1e3", 1000, 1_000_000),
            ("1E3", 1000, 1_000_000),
            ("1u", 1, 1),
            ("1n", 1, 1),
            ("0", 0, 0),
            ("-1", -1, -1000),
            ("+5", 5, 5000),
            (".5", 1, 500),
            ("1.25Gi", 1_342_177_280, 1_342_177_280_000),
        ] {
            assert_eq!(parse_value(s), Ok(value), "value of {s}");
            assert_eq!(parse_milli_value(s), Ok(milli), "milli of {s}");
        }
    }

    #[test]
    fn rejects_malformed() {
        for s in ["", "abc", "1.2.3", "1Qi", "m", "1e", "--1"] {
            assert!(parse_value(s).is_err(), "{s} should be rejected");
        }
    }

    #[test]
    fn tiny_quantities_round_up_like_other_fractions() {
        // Below 10^-38 the division is skipped; the result must still be the ceiling, as for "-0.5".
        for (s, value, milli) in [
            ("1e-50", 1, 1),
            ("-1e-50", 0, 0),
            ("-0.5", 0, -500),
            ("-1e-39", 0, 0),
            ("-0.0000000000000000000000000000000000000000001", 0, 0),
        ] {
            assert_eq!(parse_value(s), Ok(value), "value of {s}");
            assert_eq!(parse_milli_value(s), Ok(milli), "milli of {s}");
        }
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        assert_eq!(parse_value("100E"), Ok(i64::MAX));
    }

    #[test]
    fn long_quantities_with_binary_suffixes_keep_their_value() {
        // 30 significant digits times 2^30 or 2^60 do not fit in an i128; found by fuzzing (the
        // value wrapped in release builds, the addition panicked in debug ones). Expected values
        // are the exact ceilings (Python's decimal module at 100 digits).
        for (s, value, milli) in [
            (
                "2037.35110090000000207341010563903Gi",
                2_187_589_087_209,
                2_187_589_087_208_775,
            ),
            (
                "0.000000001234567890123456789012345Ei",
                1_423_359_870,
                1_423_359_869_421,
            ),
            (
                "-2037.35110090000000207341010563903Gi",
                -2_187_589_087_208,
                -2_187_589_087_208_774,
            ),
            ("9999999999.99999999999999999999Ei", i64::MAX, i64::MAX),
        ] {
            assert_eq!(parse_value(s), Ok(value), "value of {s}");
            assert_eq!(parse_milli_value(s), Ok(milli), "milli of {s}");
        }
    }

    #[test]
    fn formats_amounts_for_humans() {
        assert_eq!(format_amount(CPU, 300), "300m");
        assert_eq!(format_amount(CPU, 2000), "2");
        assert_eq!(format_amount(MEMORY, 256 << 20), "256Mi");
        assert_eq!(format_amount(MEMORY, 1000), "1000");
    }

    #[test]
    fn scalar_resource_names() {
        assert!(is_scalar_resource_name("nvidia.com/gpu"));
        assert!(is_scalar_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("attachable-volumes-csi-x"));
        assert!(!is_scalar_resource_name("cpu"));
        assert!(!is_scalar_resource_name("pods"));
    }
}
