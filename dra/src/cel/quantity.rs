//! The Kubernetes quantity CEL library (`k8s.io/apiserver/pkg/cel/library/quantity.go`):
//! `quantity(string)`, `isQuantity(string)`, `sign(quantity)` and the members `isInteger`,
//! `asInteger`, `asApproximateFloat`, `add`/`sub` (quantity or int), `isGreaterThan`,
//! `isLessThan`, `compareTo`, plus `==` between quantities.
//!
//! A quantity is held exactly as a signed count of nano-units (`i128`), which is what
//! `resource.ParseQuantity` keeps too (it rounds anything finer than `1n` up, away from zero), so
//! `"80Gi"`, `"85899345920"` and `"85899345920000m"` are the same value and compare equal.
//! `BinarySI` values above 2^63-1 are capped as upstream; a decimal value beyond about 1.7e29
//! (the `i128` range in nano-units) is reported as out of range, where upstream's arbitrary
//! precision `inf.Dec` would still hold it.

use std::any::Any;
use std::cmp::Ordering;

use cel::common::types::{CelBool, CelDouble, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// Why a string is not a quantity: the texts of `k8s.io/apimachinery/pkg/api/resource`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `ErrFormatWrong`.
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    /// `ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// Beyond what this implementation holds exactly (about ±1.7e29); upstream has no such limit.
    #[error("quantity is out of the supported range")]
    OutOfRange,
}

/// The CEL type of quantities (`apiservercel.QuantityType`).
pub static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// `resource.maxAllowed`: what a `BinarySI` quantity is capped at, in nano-units.
const MAX_BINARY_NANOS: i128 = (i64::MAX as i128) * NANOS_PER_UNIT;

/// An exact quantity: a count of nano-units (`1n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    /// The quantity `units` (an integer, as `resource.NewQuantity`).
    pub fn from_int(units: i64) -> Self {
        Quantity {
            nanos: units as i128 * NANOS_PER_UNIT,
        }
    }

    /// Parses `s` as `resource.ParseQuantity` does.
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        let scanned = scan(s)?;
        let (base, exponent, binary) = interpret_suffix(scanned.suffix)?;
        // The value is int(num ++ denom) * 10^-len(denom) * base^exponent.
        let denom = scanned.denom.trim_end_matches('0');
        let mut digits = String::with_capacity(scanned.num.len() + denom.len());
        digits.push_str(scanned.num);
        digits.push_str(denom);
        let digits = digits.trim_start_matches('0');
        if digits.len() > 38 {
            return Err(QuantityError::OutOfRange);
        }
        let mantissa: u128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| QuantityError::Numeric)?
        };
        // Power of ten still to apply to reach nano-units, and the power of two.
        let (mut pow10, pow2): (i64, u32) = if base == 2 {
            (9 - denom.len() as i64, exponent as u32)
        } else {
            (9 - denom.len() as i64 + exponent, 0)
        };
        let mut value = mantissa;
        if value != 0 {
            value = value
                .checked_shl(pow2)
                .filter(|v| v >> pow2 == mantissa)
                .ok_or(QuantityError::OutOfRange)?;
            while pow10 > 0 {
                value = value.checked_mul(10).ok_or(QuantityError::OutOfRange)?;
                pow10 -= 1;
            }
            if pow10 < 0 {
                // Round up (away from zero) to whole nano-units, as ParseQuantity does.
                let mut divisor: u128 = 1;
                let mut exact = true;
                while pow10 < 0 {
                    match divisor.checked_mul(10) {
                        Some(d) => divisor = d,
                        None => {
                            exact = false;
                            break;
                        }
                    }
                    pow10 += 1;
                }
                value = if !exact {
                    1
                } else {
                    value / divisor + u128::from(!value.is_multiple_of(divisor))
                };
            }
        }
        let mut nanos = i128::try_from(value).map_err(|_| QuantityError::OutOfRange)?;
        if binary && nanos > MAX_BINARY_NANOS {
            nanos = MAX_BINARY_NANOS;
        }
        if !scanned.positive {
            nanos = -nanos;
        }
        Ok(Quantity { nanos })
    }

    /// `Sign()`: -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        self.nanos.signum() as i64
    }

    /// `AsInt64()`: the value if it is an integer that fits an `int`.
    pub fn as_i64(&self) -> Option<i64> {
        if self.nanos % NANOS_PER_UNIT != 0 {
            return None;
        }
        i64::try_from(self.nanos / NANOS_PER_UNIT).ok()
    }

    /// `AsApproximateFloat64()`.
    pub fn as_f64(&self) -> f64 {
        let units = self.nanos / NANOS_PER_UNIT;
        let frac = self.nanos % NANOS_PER_UNIT;
        units as f64 + frac as f64 / NANOS_PER_UNIT as f64
    }

    /// `Cmp()`.
    pub fn cmp_to(&self, other: &Quantity) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }

    /// `Add()`; `None` only beyond the `i128` range.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        self.nanos
            .checked_add(other.nanos)
            .map(|nanos| Quantity { nanos })
    }

    /// `Sub()`; `None` only beyond the `i128` range.
    pub fn checked_sub(&self, other: &Quantity) -> Option<Quantity> {
        self.nanos
            .checked_sub(other.nanos)
            .map(|nanos| Quantity { nanos })
    }
}

/// The parts `parseQuantityString` splits a quantity into.
struct Scanned<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// `parseQuantityString`: sign, numerator, denominator and suffix, without interpreting them.
fn scan(s: &str) -> Result<Scanned<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    let zero = Scanned {
        positive,
        num: "0",
        denom: "",
        suffix: "",
    };
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(zero);
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == num_start { "0" } else { &s[num_start..pos] };
    if pos >= end {
        return Ok(Scanned { num, ..zero });
    }
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
        if pos >= end {
            return Ok(Scanned { num, denom, ..zero });
        }
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Scanned {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// `suffixHandler.interpret`: (base, exponent, is BinarySI).
fn interpret_suffix(suffix: &str) -> Result<(u32, i64, bool), QuantityError> {
    let dec = |e| Ok((10, e, false));
    let bin = |e| Ok((2, e, true));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ if suffix.len() > 1 && (suffix.starts_with('e') || suffix.starts_with('E')) => {
            let exp: i64 = suffix[1..].parse().map_err(|_| QuantityError::Suffix)?;
            // ParseQuantity keeps int32(exponent); anything that large is out of our range anyway.
            if exp.unsigned_abs() > 1000 {
                return if exp < 0 {
                    dec(-1000)
                } else {
                    Err(QuantityError::OutOfRange)
                };
            }
            dec(exp)
        }
        _ => Err(QuantityError::Suffix),
    }
}

/// A quantity as a CEL value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantityVal(pub Quantity);

impl Val for QuantityVal {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }

    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<QuantityVal>()
            .is_some_and(|o| o.0.cmp_to(&self.0) == Ordering::Equal)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for QuantityVal {}

fn err(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn quantity(s: &CelString<'_>) -> Result<QuantityVal, ExecutionError> {
    Quantity::parse(s.inner())
        .map(QuantityVal)
        .map_err(|e| err("quantity", e))
}

fn is_quantity(s: &CelString<'_>) -> CelBool {
    Quantity::parse(s.inner()).is_ok().into()
}

fn sign(q: &QuantityVal) -> CelInt {
    q.0.sign().into()
}

fn is_integer(q: &QuantityVal) -> CelBool {
    q.0.as_i64().is_some().into()
}

fn as_integer(q: &QuantityVal) -> Result<CelInt, ExecutionError> {
    q.0.as_i64()
        .map(CelInt::from)
        .ok_or_else(|| err("asInteger", "cannot convert value to integer"))
}

fn as_approximate_float(q: &QuantityVal) -> CelDouble {
    q.0.as_f64().into()
}

fn q_is_greater_than(a: &QuantityVal, b: &QuantityVal) -> CelBool {
    (a.0.cmp_to(&b.0) == Ordering::Greater).into()
}

fn q_is_less_than(a: &QuantityVal, b: &QuantityVal) -> CelBool {
    (a.0.cmp_to(&b.0) == Ordering::Less).into()
}

fn q_compare_to(a: &QuantityVal, b: &QuantityVal) -> CelInt {
    (a.0.cmp_to(&b.0) as i64).into()
}

fn overflow(function: &str) -> ExecutionError {
    err(function, "quantity overflow")
}

fn q_add(a: &QuantityVal, b: &QuantityVal) -> Result<QuantityVal, ExecutionError> {
    a.0.checked_add(&b.0)
        .map(QuantityVal)
        .ok_or_else(|| overflow("add"))
}

fn q_add_int(a: &QuantityVal, b: &CelInt) -> Result<QuantityVal, ExecutionError> {
    a.0.checked_add(&Quantity::from_int(*b.inner()))
        .map(QuantityVal)
        .ok_or_else(|| overflow("add"))
}

fn q_sub(a: &QuantityVal, b: &QuantityVal) -> Result<QuantityVal, ExecutionError> {
    a.0.checked_sub(&b.0)
        .map(QuantityVal)
        .ok_or_else(|| overflow("sub"))
}

fn q_sub_int(a: &QuantityVal, b: &CelInt) -> Result<QuantityVal, ExecutionError> {
    a.0.checked_sub(&Quantity::from_int(*b.inner()))
        .map(QuantityVal)
        .ok_or_else(|| overflow("sub"))
}

/// Registers the quantity library on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(QUANTITY_TYPE.to_owned())?;
    cel::add_overload!(env, fn quantity: (CelString<'_>) -> Result<QuantityVal>)?;
    cel::add_overload!(env, fn is_quantity: (CelString<'_>) -> CelBool)?;
    cel::add_overload!(env, fn sign: (QuantityVal) -> CelInt)?;
    cel::add_member_overload!(env, fn is_integer: (QuantityVal) -> CelBool)?;
    cel::add_member_overload!(env, fn as_integer: (QuantityVal) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn as_approximate_float: (QuantityVal) -> CelDouble)?;
    cel::add_member_overload!(env, fn q_is_greater_than: (QuantityVal, QuantityVal) -> CelBool,
        name = "isGreaterThan", id = "quantity_is_greater_than")?;
    cel::add_member_overload!(env, fn q_is_less_than: (QuantityVal, QuantityVal) -> CelBool,
        name = "isLessThan", id = "quantity_is_less_than")?;
    cel::add_member_overload!(env, fn q_compare_to: (QuantityVal, QuantityVal) -> CelInt,
        name = "compareTo", id = "quantity_compare_to")?;
    cel::add_member_overload!(env, fn q_add: (QuantityVal, QuantityVal) -> Result<QuantityVal>,
        name = "add", id = "quantity_add")?;
    cel::add_member_overload!(env, fn q_add_int: (QuantityVal, CelInt) -> Result<QuantityVal>,
        name = "add", id = "quantity_add_int")?;
    cel::add_member_overload!(env, fn q_sub: (QuantityVal, QuantityVal) -> Result<QuantityVal>,
        name = "sub", id = "quantity_sub")?;
    cel::add_member_overload!(env, fn q_sub_int: (QuantityVal, CelInt) -> Result<QuantityVal>,
        name = "sub", id = "quantity_sub_int")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let n = |units: i128, nanos: i128| units * NANOS_PER_UNIT + nanos;
        let cases: &[(&str, Result<i128, QuantityError>)] = &[
            ("0", Ok(0)),
            ("1", Ok(n(1, 0))),
            ("-1", Ok(n(-1, 0))),
            ("+5", Ok(n(5, 0))),
            ("100m", Ok(n(0, 100_000_000))),
            ("1.5", Ok(n(1, 500_000_000))),
            (".5", Ok(n(0, 500_000_000))),
            ("1.", Ok(n(1, 0))),
            ("1Ki", Ok(n(1024, 0))),
            ("1.5Gi", Ok(n(1_610_612_736, 0))),
            ("80Gi", Ok(n(85_899_345_920, 0))),
            ("85899345920", Ok(n(85_899_345_920, 0))),
            ("1k", Ok(n(1000, 0))),
            ("1M", Ok(n(1_000_000, 0))),
            ("1E", Ok(n(1_000_000_000_000_000_000, 0))),
            ("1e3", Ok(n(1000, 0))),
            ("1E-3", Ok(n(0, 1_000_000))),
            ("12n", Ok(12)),
            ("1u", Ok(1000)),
            ("0.1n", Ok(1)),
            ("-0.1n", Ok(-1)),
            ("1e-12", Ok(1)),
            ("8Ei", Ok(MAX_BINARY_NANOS)),
            ("-", Ok(0)),
            ("000", Ok(0)),
            ("", Err(QuantityError::FormatWrong)),
            ("abc", Err(QuantityError::FormatWrong)),
            ("1 Gi", Err(QuantityError::FormatWrong)),
            ("1Gi ", Err(QuantityError::FormatWrong)),
            ("1Zi", Err(QuantityError::FormatWrong)),
            ("1ki", Err(QuantityError::Suffix)),
            ("1e", Err(QuantityError::Suffix)),
            ("1iM", Err(QuantityError::Suffix)),
            ("1e40", Err(QuantityError::OutOfRange)),
        ];
        for (input, want) in cases {
            let got = Quantity::parse(input).map(|q| q.nanos);
            assert_eq!(&got, want, "{input:?}");
        }
    }

    #[test]
    fn arithmetic_and_conversions() {
        let q = |s| Quantity::parse(s).unwrap();
        assert_eq!(q("80Gi").cmp_to(&q("85899345920")), Ordering::Equal);
        assert_eq!(q("1").cmp_to(&q("1000m")), Ordering::Equal);
        assert_eq!(q("1").cmp_to(&q("1001m")), Ordering::Less);
        assert_eq!(q("1Mi").checked_add(&q("1Mi")), Some(q("2Mi")));
        assert_eq!(q("1").checked_sub(&q("1500m")), Some(q("-500m")));
        assert_eq!(q("1500m").as_i64(), None);
        assert_eq!(q("2k").as_i64(), Some(2000));
        assert_eq!(q("1E").as_i64(), Some(1_000_000_000_000_000_000));
        assert_eq!(q("10E").as_i64(), None);
        assert_eq!(q("1500m").as_f64(), 1.5);
        assert_eq!(q("-3").sign(), -1);
        assert_eq!(q("0").sign(), 0);
        assert_eq!(Quantity::from_int(7), q("7"));
    }
}
