//! Exact resource quantities for counters and consumable capacity (`resource.Quantity` arithmetic
//! as the allocator uses it): values are held in nano-units as `i128`, which is exactly the
//! precision `resource.ParseQuantity` keeps (it rounds finer values up to the next nano), so `80Gi`,
//! `1500m` and `1e3` add, subtract and compare without loss.

use std::cmp::Ordering;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub use sched_apimachinery::resource::QuantityFormat;
use sched_apimachinery::resource::QuantityParts;

/// Nano-units per unit.
const NANO: i128 = 1_000_000_000;
/// Saturation bound: far above any int64-scaled quantity (9.2e27 nano), far below `i128::MAX`, so
/// sums of a few saturated values cannot overflow.
const LIMIT: i128 = 1 << 120;
/// The exponent range this precision accepts (`1e<exp>`): the saturation at [`LIMIT`] and the rounding
/// to a nano keep any exponent in range exact or saturated.
const MAX_EXPONENT: i32 = 1000;

/// An exact quantity: `nano / 10^9` units, written in `format`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExactQuantity {
    nano: i128,
    format: QuantityFormat,
}

impl PartialEq for ExactQuantity {
    /// Equal values, whatever their format (`Quantity.Cmp(...) == 0`).
    fn eq(&self, other: &Self) -> bool {
        self.nano == other.nano
    }
}

impl Eq for ExactQuantity {}

impl PartialOrd for ExactQuantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ExactQuantity {
    /// `Quantity.Cmp`.
    fn cmp(&self, other: &Self) -> Ordering {
        self.nano.cmp(&other.nano)
    }
}

impl ExactQuantity {
    /// Zero.
    pub const ZERO: ExactQuantity = ExactQuantity {
        nano: 0,
        format: QuantityFormat::DecimalSI,
    };

    /// Parses a quantity string as `resource.ParseQuantity` does (rounding values finer than a
    /// nano-unit up, away from zero); `None` when it is not a quantity. The syntax is
    /// [`QuantityParts`]'s, shared with the int64 precision of `resource::parse_value`.
    pub fn parse(s: &str) -> Option<Self> {
        let QuantityParts {
            negative,
            integer: int_part,
            fraction: frac_part,
            pow2,
            pow10,
            format,
        } = QuantityParts::split(s, MAX_EXPONENT)?;
        // digits / 10^frac_len * 2^pow2 * 10^pow10 * 10^9, rounded up.
        let mut digits: i128 = 0;
        let mut dropped_nonzero = false;
        let mut shift: i32 = 0; // digits beyond what i128 holds, as a power of ten to multiply by
        for (i, c) in int_part.chars().chain(frac_part.chars()).enumerate() {
            let d = i128::from(c as u8 - b'0');
            if digits > LIMIT / 10 {
                if i < int_part.len() {
                    shift += 1;
                } else if d != 0 {
                    dropped_nonzero = true;
                }
                continue;
            }
            digits = digits * 10 + d;
            if i >= int_part.len() {
                shift -= 1;
            }
        }
        let mut value = digits.saturating_mul(1_i128 << pow2).min(LIMIT);
        let exp10 = shift + pow10 + 9;
        if exp10 >= 0 {
            for _ in 0..exp10 {
                value = value.saturating_mul(10).min(LIMIT);
            }
        } else {
            for _ in 0..(-exp10) {
                if value % 10 != 0 {
                    dropped_nonzero = true;
                }
                value /= 10;
                if value == 0 {
                    break;
                }
            }
        }
        if dropped_nonzero {
            value += 1;
        }
        Some(ExactQuantity {
            nano: if negative { -value } else { value },
            format,
        })
    }

    /// A Kubernetes quantity; a malformed one (the API server rejects those) counts as zero.
    pub fn from_quantity(q: &Quantity) -> Self {
        Self::parse(&q.0).unwrap_or_default()
    }

    /// `resource.NewQuantity(value, format)`.
    pub fn from_value(value: i64, format: QuantityFormat) -> Self {
        ExactQuantity {
            nano: i128::from(value) * NANO,
            format,
        }
    }

    /// `resource.NewMilliQuantity(milli, format)`.
    pub fn from_milli(milli: i64, format: QuantityFormat) -> Self {
        ExactQuantity {
            nano: i128::from(milli) * 1_000_000,
            format,
        }
    }

    /// The format it is written in.
    pub fn format(&self) -> QuantityFormat {
        self.format
    }

    /// `Quantity.Sign`.
    pub fn signum(&self) -> i32 {
        self.nano.signum() as i32
    }

    /// `Quantity.IsZero`.
    pub fn is_zero(&self) -> bool {
        self.nano == 0
    }

    /// `Quantity.Add` (the receiver's format is kept).
    pub fn add(&mut self, other: &ExactQuantity) {
        self.nano = self.nano.saturating_add(other.nano).clamp(-LIMIT, LIMIT);
    }

    /// `Quantity.Sub` (the receiver's format is kept).
    pub fn sub(&mut self, other: &ExactQuantity) {
        self.nano = self.nano.saturating_sub(other.nano).clamp(-LIMIT, LIMIT);
    }

    /// Value scaled by `10^-divisor_pow`, rounded away from zero and saturated to `i64`.
    fn scaled(&self, unit: i128) -> i64 {
        let magnitude = self.nano.unsigned_abs().div_ceil(unit as u128);
        let magnitude = i128::try_from(magnitude).unwrap_or(i128::MAX);
        let signed = if self.nano < 0 { -magnitude } else { magnitude };
        signed.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// `Quantity.Value` (rounded up, saturated instead of wrapping).
    pub fn value(&self) -> i64 {
        self.scaled(NANO)
    }

    /// `Quantity.MilliValue` (rounded up, saturated instead of wrapping).
    pub fn milli_value(&self) -> i64 {
        self.scaled(1_000_000)
    }

    /// The milli-value when it is exact and fits `i64` (`safeMilliValue`).
    pub fn exact_milli_value(&self) -> Option<i64> {
        if self.nano % 1_000_000 != 0 {
            return None;
        }
        i64::try_from(self.nano / 1_000_000).ok()
    }

    /// `q.CmpInt64(v)`.
    pub fn cmp_i64(&self, v: i64) -> Ordering {
        self.nano.cmp(&(i128::from(v) * NANO))
    }

    /// The canonical string Go serializes the quantity as (`Quantity.String`).
    pub fn to_canonical_string(&self) -> String {
        let n = self.nano;
        if n == 0 {
            return "0".to_string();
        }
        let binary = self.format == QuantityFormat::BinarySI
            && n % NANO == 0
            && n.unsigned_abs() >= 1024 * NANO as u128;
        if binary {
            let mut v = n / NANO;
            let mut i = 0;
            while i < 6 && v % 1024 == 0 {
                v /= 1024;
                i += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][i];
            return format!("{v}{suffix}");
        }
        // Decimal: the largest power of 1000 (from nano up to exa) dividing the value.
        let mut exp = -9;
        let mut mantissa = n;
        while exp < 18 && mantissa % 1000 == 0 {
            mantissa /= 1000;
            exp += 3;
        }
        if self.format == QuantityFormat::DecimalExponent {
            if exp == 0 {
                return format!("{mantissa}");
            }
            return format!("{mantissa}e{exp}");
        }
        let suffix = match exp {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            _ => "E",
        };
        format!("{mantissa}{suffix}")
    }

    /// As a Kubernetes quantity (canonical string).
    pub fn to_quantity(&self) -> Quantity {
        Quantity(self.to_canonical_string())
    }
}

impl std::fmt::Display for ExactQuantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_canonical_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> ExactQuantity {
        ExactQuantity::parse(s).unwrap()
    }

    #[test]
    fn parses_exactly() {
        assert_eq!(q("80Gi").value(), 80 << 30);
        assert_eq!(q("1500m").milli_value(), 1500);
        assert_eq!(q("1500m").value(), 2);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1.5k").value(), 1500);
        assert_eq!(q("0.5").milli_value(), 500);
        assert_eq!(q("1n").nano, 1);
        assert_eq!(q("0.1n").nano, 1, "rounded up to a nano");
        assert_eq!(q("-2").value(), -2);
        assert!(ExactQuantity::parse("").is_none());
        assert!(ExactQuantity::parse("1.2.3").is_none());
        assert!(ExactQuantity::parse("5X").is_none());
        assert!(ExactQuantity::parse("Ki").is_none());
        assert_eq!(q("1Mi"), q("1024Ki"));
        assert!(q("1G") < q("1Gi"));
        // Huge values saturate rather than overflow.
        assert_eq!(q("99999999999999999999999999999999999999999E").value(), i64::MAX);
    }

    #[test]
    fn both_precisions_read_the_same_syntax() {
        // One syntax (resource::QuantityParts) behind both precisions: the same strings are quantities,
        // and where no rounding differs (positive, at most nano-precise) the int64 values agree.
        for s in [
            "1", "500m", " 2Gi ", "+5", ".5", "1.25Gi", "1e3", "1E-3", "7n", "3u", "1.5k", "2M", "4T", "1P",
            "1E", "1Ei", "", " ", ".", "abc", "1.2.3", "1Qi", "m", "1e", "--1", "1e+", "Ki", "-", "1 m",
        ] {
            let int64 = (
                sched_apimachinery::resource::parse_value(s),
                sched_apimachinery::resource::parse_milli_value(s),
            );
            let exact = ExactQuantity::parse(s);
            assert_eq!(int64.0.is_ok(), exact.is_some(), "{s:?}: {int64:?} vs {exact:?}");
            if let Some(exact) = exact {
                assert_eq!(
                    (int64.0, int64.1),
                    (Ok(exact.value()), Ok(exact.milli_value())),
                    "{s:?}"
                );
            }
        }
        // Each precision keeps its own exponent range: the int64 one rejects what it cannot use.
        assert!(sched_apimachinery::resource::parse_value("1e101").is_err());
        assert_eq!(q("1e101").value(), i64::MAX);
    }

    #[test]
    fn arithmetic_is_exact() {
        let mut a = q("80Gi");
        a.sub(&q("1"));
        a.add(&q("1"));
        assert_eq!(a, q("80Gi"));
        let mut b = q("100m");
        for _ in 0..9 {
            b.add(&q("100m"));
        }
        assert_eq!(b, q("1"));
        assert_eq!(q("1500m").exact_milli_value(), Some(1500));
        assert_eq!(q("1500u").exact_milli_value(), None);
    }

    #[test]
    fn canonical_strings() {
        for (input, want) in [
            ("80Gi", "80Gi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("2000", "2k"),
            ("0", "0"),
            ("1e3", "1e3"),
            ("100Ki", "100Ki"),
            ("1000Ki", "1000Ki"),
        ] {
            assert_eq!(q(input).to_canonical_string(), want, "{input}");
        }
        assert_eq!(
            ExactQuantity::from_value(2048, QuantityFormat::BinarySI).to_canonical_string(),
            "2Ki"
        );
        assert_eq!(
            ExactQuantity::from_milli(1500, QuantityFormat::DecimalSI).to_canonical_string(),
            "1500m"
        );
    }
}
