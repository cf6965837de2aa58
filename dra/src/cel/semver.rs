//! The Kubernetes semver CEL library at `SemverVersion(1)`
//! (`k8s.io/apiserver/pkg/cel/library/semverlib.go`): `semver(string)`, `semver(string, bool)`
//! (normalize), `isSemver(string)`, `isSemver(string, bool)`, and the members `major`, `minor`,
//! `patch`, `isGreaterThan`, `isLessThan`, `compareTo`, plus `==` (precedence equality: build
//! metadata is ignored, as `Version.Compare`).
//!
//! Parsing follows `github.com/blang/semver/v4`'s `Parse` (strict `MAJOR.MINOR.PATCH[-pre][+build]`,
//! no leading zeroes) with its error texts; DRA's `version` attributes are parsed the same way.

use std::any::Any;
use std::cmp::Ordering;

use cel::common::types::{CelBool, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// Why a string is not a semantic version: `blang/semver`'s texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SemverError {
    /// An empty string.
    #[error("Version string empty")]
    Empty,
    /// Fewer than three dot-separated parts.
    #[error("No Major.Minor.Patch elements found")]
    NoElements,
    /// A non-digit in a numeric part (`part` is "major", "minor" or "patch").
    #[error("Invalid character(s) found in {part} number {value:?}")]
    InvalidNumber {
        /// Which part.
        part: &'static str,
        /// The offending text.
        value: String,
    },
    /// A numeric part with a leading zero (`part` is "Major", "Minor" or "Patch").
    #[error("{part} number must not contain leading zeroes {value:?}")]
    LeadingZero {
        /// Which part.
        part: &'static str,
        /// The offending text.
        value: String,
    },
    /// A number that is empty or does not fit 64 bits (`strconv.ParseUint`'s text).
    #[error("strconv.ParseUint: parsing {0:?}: {1}")]
    ParseUint(String, &'static str),
    /// An empty prerelease identifier.
    #[error("Prerelease is empty")]
    PrereleaseEmpty,
    /// A numeric prerelease identifier with a leading zero.
    #[error("Numeric PreRelease version must not contain leading zeroes {0:?}")]
    PrereleaseLeadingZero(String),
    /// A prerelease identifier with a character outside `[0-9A-Za-z-]`.
    #[error("Invalid character(s) found in prerelease {0:?}")]
    PrereleaseInvalid(String),
    /// An empty build identifier.
    #[error("Build meta data is empty")]
    BuildEmpty,
    /// A build identifier with a character outside `[0-9A-Za-z-]`.
    #[error("Invalid character(s) found in build meta data {0:?}")]
    BuildInvalid(String),
    /// A shortened version with prerelease or build data, when normalizing.
    #[error("short version cannot contain PreRelease/Build meta data")]
    ShortWithMeta,
}

/// The CEL type of semantic versions (`apiservercel.SemverType`).
pub static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

/// One prerelease identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pre {
    Num(u64),
    Alpha(String),
}

impl Pre {
    fn compare(&self, other: &Pre) -> Ordering {
        match (self, other) {
            (Pre::Num(a), Pre::Num(b)) => a.cmp(b),
            (Pre::Num(_), Pre::Alpha(_)) => Ordering::Less,
            (Pre::Alpha(_), Pre::Num(_)) => Ordering::Greater,
            (Pre::Alpha(a), Pre::Alpha(b)) => a.cmp(b),
        }
    }
}

/// A semantic version (`semver.Version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    /// MAJOR.
    pub major: u64,
    /// MINOR.
    pub minor: u64,
    /// PATCH.
    pub patch: u64,
    pre: Vec<Pre>,
    build: Vec<String>,
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

fn parse_number(s: &str, lower: &'static str, upper: &'static str) -> Result<u64, SemverError> {
    if !s.chars().all(|c| c.is_ascii_digit()) {
        return Err(SemverError::InvalidNumber {
            part: lower,
            value: s.to_string(),
        });
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(SemverError::LeadingZero {
            part: upper,
            value: s.to_string(),
        });
    }
    if s.is_empty() {
        return Err(SemverError::ParseUint(String::new(), "invalid syntax"));
    }
    s.parse()
        .map_err(|_| SemverError::ParseUint(s.to_string(), "value out of range"))
}

impl Semver {
    /// `semver.Parse`.
    pub fn parse(s: &str) -> Result<Self, SemverError> {
        if s.is_empty() {
            return Err(SemverError::Empty);
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        if parts.len() != 3 {
            return Err(SemverError::NoElements);
        }
        let major = parse_number(parts[0], "major", "Major")?;
        let minor = parse_number(parts[1], "minor", "Minor")?;
        let mut patch_str = parts[2];
        let mut build = Vec::new();
        let mut pre = Vec::new();
        let mut build_ids: Vec<&str> = Vec::new();
        if let Some(i) = patch_str.find('+') {
            build_ids = patch_str[i + 1..].split('.').collect();
            patch_str = &patch_str[..i];
        }
        let mut pre_ids: Vec<&str> = Vec::new();
        if let Some(i) = patch_str.find('-') {
            pre_ids = patch_str[i + 1..].split('.').collect();
            patch_str = &patch_str[..i];
        }
        let patch = parse_number(patch_str, "patch", "Patch")?;
        for id in pre_ids {
            if id.is_empty() {
                return Err(SemverError::PrereleaseEmpty);
            }
            if id.chars().all(|c| c.is_ascii_digit()) {
                if id.len() > 1 && id.starts_with('0') {
                    return Err(SemverError::PrereleaseLeadingZero(id.to_string()));
                }
                let n = id
                    .parse()
                    .map_err(|_| SemverError::ParseUint(id.to_string(), "value out of range"))?;
                pre.push(Pre::Num(n));
            } else if id.chars().all(is_alnum) {
                pre.push(Pre::Alpha(id.to_string()));
            } else {
                return Err(SemverError::PrereleaseInvalid(id.to_string()));
            }
        }
        for id in build_ids {
            if id.is_empty() {
                return Err(SemverError::BuildEmpty);
            }
            if !id.chars().all(is_alnum) {
                return Err(SemverError::BuildInvalid(id.to_string()));
            }
            build.push(id.to_string());
        }
        Ok(Semver {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    /// `normalizeAndParse`: drops a leading `v`, leading zeroes, and fills in a missing minor or
    /// patch number with 0.
    pub fn parse_normalized(s: &str) -> Result<Self, SemverError> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s.splitn(3, '.').map(str::to_string).collect();
        for p in parts.iter_mut() {
            if p.len() > 1 {
                let trimmed = p.trim_start_matches('0');
                *p = if trimmed.is_empty() || !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    format!("0{trimmed}")
                } else {
                    trimmed.to_string()
                };
            }
        }
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains('+') || p.contains('-')) {
                return Err(SemverError::ShortWithMeta);
            }
            while parts.len() < 3 {
                parts.push("0".to_string());
            }
        }
        Semver::parse(&parts.join("."))
    }

    /// `Version.Compare`: precedence order, build metadata ignored.
    pub fn compare(&self, other: &Semver) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(other.pre.iter()) {
            let c = a.compare(b);
            if c != Ordering::Equal {
                return c;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }

    /// Whether build metadata was given (kept only for completeness of the parse).
    pub fn has_build(&self) -> bool {
        !self.build.is_empty()
    }
}

/// A semantic version as a CEL value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemverVal(pub Semver);

impl Val for SemverVal {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }

    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<SemverVal>()
            .is_some_and(|o| o.0.compare(&self.0) == Ordering::Equal)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for SemverVal {}

fn semver(s: &CelString<'_>) -> Result<SemverVal, ExecutionError> {
    Semver::parse(s.inner())
        .map(SemverVal)
        .map_err(|e| ExecutionError::function_error("semver", e))
}

fn semver_normalize(s: &CelString<'_>, normalize: &CelBool) -> Result<SemverVal, ExecutionError> {
    let parsed = if *normalize.inner() {
        Semver::parse_normalized(s.inner())
    } else {
        Semver::parse(s.inner())
    };
    parsed
        .map(SemverVal)
        .map_err(|e| ExecutionError::function_error("semver", e))
}

fn is_semver(s: &CelString<'_>) -> CelBool {
    Semver::parse(s.inner()).is_ok().into()
}

fn is_semver_normalize(s: &CelString<'_>, normalize: &CelBool) -> CelBool {
    if *normalize.inner() {
        Semver::parse_normalized(s.inner()).is_ok().into()
    } else {
        Semver::parse(s.inner()).is_ok().into()
    }
}

fn as_int(n: u64) -> CelInt {
    // cel-go converts with types.Int(v.Major): a wrapping conversion.
    (n as i64).into()
}

fn major(v: &SemverVal) -> CelInt {
    as_int(v.0.major)
}

fn minor(v: &SemverVal) -> CelInt {
    as_int(v.0.minor)
}

fn patch(v: &SemverVal) -> CelInt {
    as_int(v.0.patch)
}

fn v_is_greater_than(a: &SemverVal, b: &SemverVal) -> CelBool {
    (a.0.compare(&b.0) == Ordering::Greater).into()
}

fn v_is_less_than(a: &SemverVal, b: &SemverVal) -> CelBool {
    (a.0.compare(&b.0) == Ordering::Less).into()
}

fn v_compare_to(a: &SemverVal, b: &SemverVal) -> CelInt {
    (a.0.compare(&b.0) as i64).into()
}

/// Registers the semver library on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(SEMVER_TYPE.to_owned())?;
    cel::add_overload!(env, fn semver: (CelString<'_>) -> Result<SemverVal>)?;
    cel::add_overload!(env, fn semver_normalize: (CelString<'_>, CelBool) -> Result<SemverVal>,
        name = "semver")?;
    cel::add_overload!(env, fn is_semver: (CelString<'_>) -> CelBool)?;
    cel::add_overload!(env, fn is_semver_normalize: (CelString<'_>, CelBool) -> CelBool,
        name = "isSemver")?;
    cel::add_member_overload!(env, fn major: (SemverVal) -> CelInt)?;
    cel::add_member_overload!(env, fn minor: (SemverVal) -> CelInt)?;
    cel::add_member_overload!(env, fn patch: (SemverVal) -> CelInt)?;
    cel::add_member_overload!(env, fn v_is_greater_than: (SemverVal, SemverVal) -> CelBool,
        name = "isGreaterThan", id = "semver_is_greater_than")?;
    cel::add_member_overload!(env, fn v_is_less_than: (SemverVal, SemverVal) -> CelBool,
        name = "isLessThan", id = "semver_is_less_than")?;
    cel::add_member_overload!(env, fn v_compare_to: (SemverVal, SemverVal) -> CelInt,
        name = "compareTo", id = "semver_compare_to")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let ok = |s: &str| Semver::parse(s).map(|v| (v.major, v.minor, v.patch));
        assert_eq!(ok("1.2.3"), Ok((1, 2, 3)));
        assert_eq!(ok("0.0.0"), Ok((0, 0, 0)));
        assert_eq!(ok("1.2.3-rc.1+build.5"), Ok((1, 2, 3)));
        let cases: &[(&str, &str)] = &[
            ("", "Version string empty"),
            ("1.2", "No Major.Minor.Patch elements found"),
            ("a.2.3", "Invalid character(s) found in major number \"a\""),
            ("01.2.3", "Major number must not contain leading zeroes \"01\""),
            ("1.02.3", "Minor number must not contain leading zeroes \"02\""),
            ("1.2.03", "Patch number must not contain leading zeroes \"03\""),
            ("1.2.x", "Invalid character(s) found in patch number \"x\""),
            ("1..3", "strconv.ParseUint: parsing \"\": invalid syntax"),
            ("1.2.3-", "Prerelease is empty"),
            (
                "1.2.3-01",
                "Numeric PreRelease version must not contain leading zeroes \"01\"",
            ),
            ("1.2.3-a_b", "Invalid character(s) found in prerelease \"a_b\""),
            ("1.2.3+", "Build meta data is empty"),
            (
                "1.2.3+a_b",
                "Invalid character(s) found in build meta data \"a_b\"",
            ),
            ("v1.2.3", "Invalid character(s) found in major number \"v1\""),
        ];
        for (input, want) in cases {
            let got = Semver::parse(input).expect_err(input).to_string();
            assert_eq!(&got, want, "{input:?}");
        }
    }

    #[test]
    fn normalize_and_compare() {
        let n = |s: &str| Semver::parse_normalized(s).unwrap();
        let p = |s: &str| Semver::parse(s).unwrap();
        assert_eq!(n("v1").compare(&p("1.0.0")), Ordering::Equal);
        assert_eq!(n("1.02").compare(&p("1.2.0")), Ordering::Equal);
        assert_eq!(n("v01.002.0003").compare(&p("1.2.3")), Ordering::Equal);
        assert_eq!(Semver::parse_normalized("1-rc"), Err(SemverError::ShortWithMeta));
        assert_eq!(p("1.0.0-alpha").compare(&p("1.0.0")), Ordering::Less);
        assert_eq!(p("1.0.0-alpha").compare(&p("1.0.0-alpha.1")), Ordering::Less);
        assert_eq!(p("1.0.0-1").compare(&p("1.0.0-alpha")), Ordering::Less);
        assert_eq!(p("1.0.0-beta.11").compare(&p("1.0.0-beta.2")), Ordering::Greater);
        assert_eq!(p("1.0.0+a").compare(&p("1.0.0+b")), Ordering::Equal);
        assert_eq!(p("2.0.0").compare(&p("10.0.0")), Ordering::Less);
        assert!(p("1.0.0+a").has_build());
    }
}
