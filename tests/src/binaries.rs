//! Where the control-plane binaries live and which release they must be: the same rules as
//! `tests/controlplane/build.sh`, so the tests run exactly what the script built.
//!
//! Besides the pinned release (all five binaries), `tests/controlplane/releases/vX.Y/` pins one
//! release per supported minor whose kube-apiserver and kube-scheduler a test may run instead
//! (`KUBECTL_SCHED_K8S_RELEASE=v1.35` for a whole test binary, or [`Binaries::with_release`]);
//! etcd, kubectl and kube-controller-manager stay at the pinned release.

use std::path::{Path, PathBuf};

use crate::Error;

/// Overrides the binary directory, for the build script and the tests alike.
pub const BIN_DIR_ENV: &str = "KUBECTL_SCHED_K8S_BIN";

/// The command that builds the binaries, quoted in every "missing binaries" error.
pub const BUILD_COMMAND: &str = "tests/controlplane/build.sh";

/// Runs a whole test binary against another release's kube-apiserver and kube-scheduler:
/// `v1.35` names `tests/controlplane/releases/v1.35/`.
pub const RELEASE_ENV: &str = "KUBECTL_SCHED_K8S_RELEASE";

/// The components a release other than the pinned one provides.
pub const RELEASE_COMPONENTS: [&str; 2] = ["kube-apiserver", "kube-scheduler"];

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

/// The pinned release's minor, e.g. `v1.37` for `v1.37.1`.
fn pinned_minor() -> Result<Option<&'static str>, Error> {
    Ok(pinned_version()?.rsplit_once('.').map(|(minor, _)| minor))
}

/// The release `tests/controlplane/releases/<minor>/go.mod` pins, e.g. `v1.35.4` for `v1.35`.
pub fn release_version(minor: &str) -> Result<String, Error> {
    let go_mod = releases_dir().join(minor).join("go.mod");
    let text = std::fs::read_to_string(&go_mod).map_err(|_| Error::UnknownRelease {
        release: minor.to_owned(),
        known: releases().join(", "),
    })?;
    pinned_version_in(&text)
        .map(str::to_owned)
        .ok_or(Error::UnknownRelease {
            release: minor.to_owned(),
            known: releases().join(", "),
        })
}

/// The minors under `tests/controlplane/releases/`, oldest first (`v1.33`, `v1.34`, ...).
pub fn releases() -> Vec<String> {
    let mut minors: Vec<(u32, String)> = std::fs::read_dir(releases_dir())
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let minor = name.strip_prefix("v1.")?.parse().ok()?;
            Some((minor, name))
        })
        .collect();
    minors.sort();
    minors.into_iter().map(|(_, name)| name).collect()
}

fn releases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("controlplane/releases")
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

/// A directory holding every binary of [`COMPONENTS`] for the pinned release, and optionally
/// another release's [`RELEASE_COMPONENTS`].
#[derive(Clone, Debug)]
pub struct Binaries {
    dir: PathBuf,
    release: Option<Release>,
}

/// Another release's kube-apiserver and kube-scheduler.
#[derive(Clone, Debug)]
struct Release {
    version: String,
    dir: PathBuf,
}

impl Binaries {
    /// `$KUBECTL_SCHED_K8S_BIN`, else `${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/k8s-<version>/bin`;
    /// with `$KUBECTL_SCHED_K8S_RELEASE` set, that release's kube-apiserver and kube-scheduler.
    pub fn locate() -> Result<Self, Error> {
        let version = pinned_version()?;
        let dir = match std::env::var_os(BIN_DIR_ENV).filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => cache_dir(version)?,
        };
        let binaries = Self::in_dir(dir, version)?;
        match std::env::var(RELEASE_ENV).ok().filter(|v| !v.is_empty()) {
            Some(minor) => binaries.with_release(&minor),
            None => Ok(binaries),
        }
    }

    /// These binaries with the kube-apiserver and kube-scheduler of `tests/controlplane/releases/<minor>`
    /// (built by `tests/controlplane/build.sh <minor>`), unless `minor` is the pinned release's.
    pub fn with_release(self, minor: &str) -> Result<Self, Error> {
        // The pinned minor has no directory under releases/: its binaries are these.
        if Some(minor) == pinned_minor()? {
            return Ok(self);
        }
        let version = release_version(minor)?;
        let dir = cache_dir(&version)?;
        self.with_release_in(minor, version, dir)
    }

    fn with_release_in(self, minor: &str, version: String, dir: PathBuf) -> Result<Self, Error> {
        let missing: Vec<&str> = RELEASE_COMPONENTS
            .iter()
            .copied()
            .filter(|name| !is_executable(&dir.join(name)))
            .collect();
        if !missing.is_empty() {
            return Err(Error::ReleaseMissing {
                dir,
                missing: missing.join(", "),
                release: minor.to_owned(),
            });
        }
        check_stamp(&dir, &version)?;
        Ok(Self {
            release: Some(Release { version, dir }),
            ..self
        })
    }

    /// The release kube-apiserver and kube-scheduler come from, e.g. `v1.35.4`.
    pub fn release_version(&self) -> Option<&str> {
        self.release.as_ref().map(|r| r.version.as_str())
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
        check_stamp(&dir, version)?;
        Ok(Self { dir, release: None })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, component: &str) -> PathBuf {
        match &self.release {
            Some(release) if RELEASE_COMPONENTS.contains(&component) => release.dir.join(component),
            _ => self.dir.join(component),
        }
    }
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/k8s-<version>/bin`, where build.sh puts a release.
fn cache_dir(version: &str) -> Result<PathBuf, Error> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| Path::new(&h).join(".cache"))
        })
        .ok_or(Error::NoBinDir)?;
    Ok(cache
        .join("kubectl-sched")
        .join(format!("k8s-{version}"))
        .join("bin"))
}

/// A directory filled by hand need not carry the stamp; one that does must match, or the tests
/// would silently compare against another release.
fn check_stamp(dir: &Path, version: &str) -> Result<(), Error> {
    if let Ok(found) = std::fs::read_to_string(dir.join("VERSION")) {
        let found = found.trim();
        if found != version {
            return Err(Error::WrongVersion {
                dir: dir.to_owned(),
                found: found.to_owned(),
                pinned: version.to_owned(),
            });
        }
    }
    Ok(())
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

    #[test]
    fn every_release_directory_pins_a_release_of_its_minor() {
        let minors = releases();
        assert!(minors.len() >= 4, "{minors:?}");
        for minor in &minors {
            let version = release_version(minor).expect(minor);
            assert!(version.starts_with(&format!("{minor}.")), "{minor}: {version}");
        }
        let pinned = Binaries {
            dir: PathBuf::from("/pinned"),
            release: None,
        };
        let minor = pinned_minor().expect("go.mod").expect("a minor");
        let same = pinned
            .with_release(minor)
            .expect("the pinned minor is the pinned binaries");
        assert_eq!(same.release_version(), None);
        let err = release_version("v1.20").expect_err("no such release directory");
        assert!(err.to_string().contains("v1.33"), "{err}");
    }

    #[test]
    fn a_release_takes_only_the_api_server_and_the_scheduler() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let pinned = Binaries {
            dir: PathBuf::from("/pinned"),
            release: None,
        };
        let err = pinned
            .clone()
            .with_release_in("v1.35", "v1.35.4".into(), dir.path().to_owned())
            .expect_err("nothing built");
        assert!(err.to_string().contains("build.sh v1.35"), "{err}");
        for name in RELEASE_COMPONENTS {
            let path = dir.path().join(name);
            std::fs::write(&path, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        std::fs::write(dir.path().join("VERSION"), "v1.34.4\n").expect("write");
        let err = pinned
            .clone()
            .with_release_in("v1.35", "v1.35.4".into(), dir.path().to_owned())
            .expect_err("stamped with another release");
        assert!(err.to_string().contains("v1.34.4"), "{err}");
        std::fs::write(dir.path().join("VERSION"), "v1.35.4\n").expect("write");
        let binaries = pinned
            .with_release_in("v1.35", "v1.35.4".into(), dir.path().to_owned())
            .expect("built");
        assert_eq!(binaries.path("kube-scheduler"), dir.path().join("kube-scheduler"));
        assert_eq!(binaries.path("kube-apiserver"), dir.path().join("kube-apiserver"));
        assert_eq!(binaries.path("etcd"), Path::new("/pinned/etcd"));
        assert_eq!(binaries.path("kubectl"), Path::new("/pinned/kubectl"));
        assert_eq!(binaries.release_version(), Some("v1.35.4"));
    }
}
