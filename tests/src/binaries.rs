//! Where the control-plane binaries live and which release they must be: the same rules as
//! `tests/controlplane/build.sh`, so the tests run exactly what the script built.

use std::path::{Path, PathBuf};

use crate::Error;

/// Overrides the binary directory, for the build script and the tests alike.
pub const BIN_DIR_ENV: &str = "KUBECTL_SCHED_K8S_BIN";

/// The command that builds the binaries, quoted in every "missing binaries" error.
pub const BUILD_COMMAND: &str = "tests/controlplane/build.sh";

/// The binaries the build script produces.
pub const COMPONENTS: [&str; 5] = [
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kubectl",
];

// go.mod is the single place the release is pinned; reading it at compile time keeps the
// harness and the build script from disagreeing.
const GO_MOD: &str = include_str!("../controlplane/go.mod");

/// The Kubernetes release pinned in `tests/controlplane/go.mod`, e.g. `v1.37.1`.
pub fn pinned_version() -> Result<&'static str, Error> {
    pinned_version_in(GO_MOD).ok_or(Error::NoPinnedVersion)
}

fn pinned_version_in(go_mod: &str) -> Option<&str> {
    go_mod.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        // Matches both `require k8s.io/kubernetes vX` and a line inside a `require (...)` block.
        let first = words.next()?;
        let (module, version) = if first == "require" {
            (words.next()?, words.next()?)
        } else {
            (first, words.next()?)
        };
        (module == "k8s.io/kubernetes" && version.starts_with('v')).then_some(version)
    })
}

/// A directory holding every binary of [`COMPONENTS`] for the pinned release.
#[derive(Clone, Debug)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// `$KUBECTL_SCHED_K8S_BIN`, else `${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/k8s-<version>/bin`.
    pub fn locate() -> Result<Self, Error> {
        let version = pinned_version()?;
        let dir = match std::env::var_os(BIN_DIR_ENV).filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => {
                let cache = std::env::var_os("XDG_CACHE_HOME")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME")
                            .filter(|v| !v.is_empty())
                            .map(|h| Path::new(&h).join(".cache"))
                    })
                    .ok_or(Error::NoBinDir)?;
                cache
                    .join("kubectl-sched")
                    .join(format!("k8s-{version}"))
                    .join("bin")
            }
        };
        Self::in_dir(dir, version)
    }

    /// Checks that `dir` holds every binary and, when the build script stamped it, the release.
    pub fn in_dir(dir: impl Into<PathBuf>, version: &str) -> Result<Self, Error> {
        let dir = dir.into();
        let missing: Vec<&str> = COMPONENTS
            .iter()
            .copied()
            .filter(|name| !is_executable(&dir.join(name)))
            .collect();
        if !missing.is_empty() {
            return Err(Error::BinariesMissing {
                dir,
                missing: missing.join(", "),
            });
        }
        // A directory filled by hand need not carry the stamp; one that does must match, or the
        // tests would silently compare against another release.
        if let Ok(found) = std::fs::read_to_string(dir.join("VERSION")) {
            let found = found.trim();
            if found != version {
                return Err(Error::WrongVersion {
                    dir,
                    found: found.to_owned(),
                    pinned: version.to_owned(),
                });
            }
        }
        Ok(Self { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, component: &str) -> PathBuf {
        self.dir.join(component)
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_version_is_read_from_go_mod() {
        let cases = [
            (
                "module x\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.7.0\n\tk8s.io/kubernetes v1.37.1\n)\n",
                Some("v1.37.1"),
            ),
            ("module x\nrequire k8s.io/kubernetes v1.36.0\n", Some("v1.36.0")),
            ("module x\nreplace k8s.io/api => ./api\n", None),
            ("module x\nrequire (\n\tk8s.io/kubernetes-extra v1.0.0\n)\n", None),
        ];
        for (go_mod, want) in cases {
            assert_eq!(pinned_version_in(go_mod), want, "{go_mod}");
        }
        assert!(pinned_version().is_ok_and(|v| v.starts_with("v1.")));
    }

    #[test]
    fn missing_binaries_name_the_build_command() {
        let empty = tempfile::tempdir().expect("tempdir");
        let err = Binaries::in_dir(empty.path(), "v1.37.1").expect_err("no binaries there");
        let text = err.to_string();
        assert!(text.contains(BUILD_COMMAND), "{text}");
        assert!(text.contains("make controlplane"), "{text}");
        assert!(text.contains("kube-apiserver"), "{text}");
    }

    #[test]
    fn a_stamp_of_another_release_is_rejected() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        for name in COMPONENTS {
            let path = dir.path().join(name);
            std::fs::write(&path, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        assert!(
            Binaries::in_dir(dir.path(), "v1.37.1").is_ok(),
            "no stamp: accepted"
        );
        std::fs::write(dir.path().join("VERSION"), "v1.36.0\n").expect("write");
        let err = Binaries::in_dir(dir.path(), "v1.37.1").expect_err("other release");
        assert!(err.to_string().contains(BUILD_COMMAND), "{err}");
        std::fs::write(dir.path().join("VERSION"), "v1.37.1\n").expect("write");
        assert!(Binaries::in_dir(dir.path(), "v1.37.1").is_ok());
    }
}
