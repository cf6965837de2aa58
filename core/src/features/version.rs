//! Kubernetes release versions: which releases the engine models, and how a version is read from
//! what users and API servers write (`v1.34.4`, `1.34`, `v1.33.5-eks-3025e55`, `v1.35.1-gke.100`).
//!
//! Only major 1 exists; a version is its minor and patch. Every other part of the engine derives
//! what it needs from a version through the tables of this module's siblings (`release` for the
//! code changes, the gate table for feature gates), never by comparing minors itself.

use std::fmt;

/// A Kubernetes release, `v1.<minor>.<patch>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// The minor version (`34` in `v1.34.4`).
    pub minor: u32,
    /// The patch version (`4` in `v1.34.4`).
    pub patch: u32,
}

/// Why a version could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The text is not a Kubernetes version.
    #[error("{text:?} is not a Kubernetes version (expected v1.MINOR or v1.MINOR.PATCH, e.g. v1.34.4)")]
    Malformed {
        /// What was given.
        text: String,
    },
    /// A release outside the supported range.
    #[error(
        "Kubernetes {version} is not supported: kubectl-sched models kube-scheduler {first} to {last}{hint}",
        first = KubeVersion::OLDEST.minor_name(),
        last = KubeVersion::NEWEST.minor_name()
    )]
    Unsupported {
        /// The release.
        version: KubeVersion,
        /// A hint for the user (empty, or starting with "; ").
        hint: String,
    },
}

impl KubeVersion {
    /// The oldest release the engine models.
    pub const OLDEST: KubeVersion = KubeVersion::new(33, 13);
    /// The newest release the engine models, and the one it is pinned to by default.
    pub const NEWEST: KubeVersion = KubeVersion::new(37, 2);
    /// The release the engine uses when nothing says otherwise (the pinned release).
    pub const PINNED: KubeVersion = KubeVersion::NEWEST;
    /// The newest patch of each supported minor, the one its real kube-scheduler is tested
    /// against (tests/controlplane/releases).
    pub const SUPPORTED: [KubeVersion; 5] = [
        KubeVersion::new(33, 13),
        KubeVersion::new(34, 4),
        KubeVersion::new(35, 4),
        KubeVersion::new(36, 3),
        KubeVersion::new(37, 2),
    ];

    /// `v1.<minor>.<patch>`.
    pub const fn new(minor: u32, patch: u32) -> Self {
        KubeVersion { minor, patch }
    }

    /// Reads `v1.34.4`, `1.34.4`, `v1.34` (the newest patch the engine knows of that minor, or
    /// `.0` for an unknown minor) and versions with a vendor suffix (`v1.33.5-eks-3025e55`,
    /// `v1.34.1+k3s1`): the suffix is ignored.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let malformed = || VersionError::Malformed {
            text: text.to_string(),
        };
        let trimmed = text.trim();
        let bare = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let core = bare.split(['-', '+']).next().unwrap_or_default();
        let mut parts = core.split('.');
        let number = |part: Option<&str>| -> Result<Option<u32>, VersionError> {
            match part {
                None => Ok(None),
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                    p.parse().map(Some).map_err(|_| malformed())
                }
                Some(_) => Err(malformed()),
            }
        };
        let (Some(1), Some(minor)) = (number(parts.next())?, number(parts.next())?) else {
            return Err(malformed());
        };
        let patch = number(parts.next())?;
        if parts.next().is_some() {
            return Err(malformed());
        }
        Ok(match patch {
            Some(patch) => KubeVersion::new(minor, patch),
            None => KubeVersion::newest_patch_of(minor),
        })
    }

    /// The release an API server names in its `GET /version` answer: its `gitVersion`
    /// (`v1.33.5-eks-3025e55`), else its `major`/`minor` fields (providers append `+`: `"33+"`; the
    /// patch is then the newest tested one). None when neither names a release.
    pub fn from_server(git_version: &str, major: &str, minor: &str) -> Option<Self> {
        if let Ok(version) = KubeVersion::parse(git_version) {
            return Some(version);
        }
        let leading_number = |s: &str| -> Option<u32> {
            let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            s[..end].parse().ok()
        };
        match (leading_number(major), leading_number(minor)) {
            (Some(1), Some(minor)) => Some(KubeVersion::newest_patch_of(minor)),
            _ => None,
        }
    }

    /// The newest patch of `minor` the engine is tested against, or `v1.<minor>.0`.
    pub fn newest_patch_of(minor: u32) -> Self {
        KubeVersion::SUPPORTED
            .into_iter()
            .find(|v| v.minor == minor)
            .unwrap_or(KubeVersion::new(minor, 0))
    }

    /// Whether the engine models this release (its minor is in the supported range).
    pub fn is_supported(&self) -> bool {
        (KubeVersion::OLDEST.minor..=KubeVersion::NEWEST.minor).contains(&self.minor)
    }

    /// `self` if supported; otherwise the one-line error naming the range, with `hint`.
    pub fn supported(self, hint: &str) -> Result<Self, VersionError> {
        if self.is_supported() {
            Ok(self)
        } else {
            Err(VersionError::Unsupported {
                version: self,
                hint: if hint.is_empty() {
                    String::new()
                } else {
                    format!("; {hint}")
                },
            })
        }
    }

    /// `v1.<minor>`.
    pub fn minor_name(&self) -> String {
        format!("v1.{}", self.minor)
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v1.{}.{}", self.minor, self.patch)
    }
}

impl std::str::FromStr for KubeVersion {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KubeVersion::parse(s)
    }
}

impl serde::Serialize for KubeVersion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for KubeVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        KubeVersion::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_users_and_servers_write_them() {
        let cases = [
            ("v1.34.4", Ok(KubeVersion::new(34, 4))),
            ("1.34.2", Ok(KubeVersion::new(34, 2))),
            ("v1.34", Ok(KubeVersion::new(34, 4))),
            ("v1.31", Ok(KubeVersion::new(31, 0))),
            ("v1.33.5-eks-3025e55", Ok(KubeVersion::new(33, 5))),
            ("v1.35.1-gke.1234000", Ok(KubeVersion::new(35, 1))),
            ("v1.36.0+k3s1", Ok(KubeVersion::new(36, 0))),
            (" v1.37.1 ", Ok(KubeVersion::new(37, 1))),
        ];
        for (text, want) in cases {
            assert_eq!(KubeVersion::parse(text), want, "{text}");
        }
        for bad in [
            "",
            "v2.1.0",
            "v1",
            "v1.x",
            "v1.34.4.1",
            "latest",
            "v1..3",
            "v1.34.-1",
        ] {
            assert!(
                matches!(KubeVersion::parse(bad), Err(VersionError::Malformed { .. })),
                "{bad:?} should be malformed"
            );
        }
    }

    #[test]
    fn servers_name_their_release_in_git_version_or_their_fields() {
        let cases = [
            (("v1.34.4", "1", "34"), Some(KubeVersion::new(34, 4))),
            (("v1.33.5-eks-3025e55", "1", "33+"), Some(KubeVersion::new(33, 5))),
            (("v1.35.1-gke.1234000", "1", "35+"), Some(KubeVersion::new(35, 1))),
            // An unreadable gitVersion: the fields, with the newest patch tested of that minor.
            (("unknown", "1", "33+"), Some(KubeVersion::new(33, 13))),
            (("", "1", "36"), Some(KubeVersion::new(36, 3))),
            (("", "1", "31"), Some(KubeVersion::new(31, 0))),
            (("v0.0.0-master+$Format:%H$", "", ""), None),
            (("", "2", "0"), None),
            (("", "", ""), None),
        ];
        for ((git, major, minor), want) in cases {
            assert_eq!(
                KubeVersion::from_server(git, major, minor),
                want,
                "{git} {major}.{minor}"
            );
        }
    }

    #[test]
    fn the_supported_range_is_named_in_one_line() {
        assert!(KubeVersion::new(33, 0).supported("").is_ok());
        assert!(KubeVersion::new(37, 9).supported("").is_ok());
        let err = KubeVersion::new(32, 5)
            .supported("pick one with --kube-version")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "Kubernetes v1.32.5 is not supported: kubectl-sched models kube-scheduler v1.33 to v1.37; \
             pick one with --kube-version"
        );
        assert!(KubeVersion::new(38, 0).supported("").is_err());
    }

    #[test]
    fn versions_order_by_minor_then_patch_and_round_trip() {
        assert!(KubeVersion::new(34, 1) < KubeVersion::new(34, 2));
        assert!(KubeVersion::new(34, 9) < KubeVersion::new(35, 0));
        for v in KubeVersion::SUPPORTED {
            assert_eq!(KubeVersion::parse(&v.to_string()), Ok(v));
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(serde_json::from_str::<KubeVersion>(&json).unwrap(), v);
        }
    }
}
