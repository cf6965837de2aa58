//! The krew manifest and the release archives (deploy/RELEASING.md), without a build.
//!
//! 1. deploy/krew/sched.yaml, the manifest published at a release, names one archive per platform
//!    with the names deploy/RELEASING.md builds and the workspace version.
//! 2. `deploy/dist.sh manifest`, which `make dist` runs after packing the archives, writes one
//!    platform per archive present — its os/arch from the archive's Rust target, the uri of that
//!    archive, the sha256 of that archive's bytes (computed here with ring, not with the script's
//!    sha256sum) — and the template's plugin text unchanged; no archive, or an archive for a target
//!    krew has no platform for, is an error naming it.
//!
//! Building, packing and installing the archives with krew's own install logic take the `dist`
//! build (minutes): `make dist-check`, not part of `make test`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use serde_json::Value;

/// The release archives deploy/RELEASING.md builds, one per krew platform.
const RELEASE_TARGETS: &[(&str, &str, &str)] = &[
    ("linux", "amd64", "x86_64-unknown-linux-musl"),
    ("linux", "arm64", "aarch64-unknown-linux-musl"),
    ("darwin", "amd64", "x86_64-apple-darwin"),
    ("darwin", "arm64", "aarch64-apple-darwin"),
];

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|p| p.join("deploy"))
        .unwrap_or_else(|| PathBuf::from("../deploy"))
}

fn version() -> String {
    format!("v{}", env!("CARGO_PKG_VERSION"))
}

fn archive_name(target: &str) -> String {
    format!("kubectl-sched-{}-{target}.tar.gz", version())
}

#[test]
fn krew_manifest_names_one_release_archive_per_platform() -> Result<()> {
    let path = deploy_dir().join("krew/sched.yaml");
    let manifest: Value = yaml_serde::from_str(&std::fs::read_to_string(&path)?)?;
    ensure!(manifest["kind"] == "Plugin" && manifest["metadata"]["name"] == "sched");
    let version = manifest["spec"]["version"].as_str().context("spec.version")?;
    let cargo_version = env!("CARGO_PKG_VERSION");
    ensure!(
        version == format!("v{cargo_version}"),
        "krew version {version} vs the workspace's {cargo_version}"
    );
    let releasing = std::fs::read_to_string(deploy_dir().join("RELEASING.md"))?;
    let platforms = manifest["spec"]["platforms"]
        .as_array()
        .context("spec.platforms")?;
    ensure!(platforms.len() == RELEASE_TARGETS.len());
    for (os, arch, target) in RELEASE_TARGETS {
        let platform = platforms
            .iter()
            .find(|p| {
                p["selector"]["matchLabels"]["os"] == *os && p["selector"]["matchLabels"]["arch"] == *arch
            })
            .with_context(|| format!("no platform {os}/{arch}"))?;
        let archive = format!("kubectl-sched-{version}-{target}.tar.gz");
        let uri = platform["uri"].as_str().context("uri")?;
        ensure!(
            uri.ends_with(&format!("/{version}/{archive}")),
            "{os}/{arch}: {uri}"
        );
        ensure!(releasing.contains(target), "RELEASING.md builds {target}");
        let sha = platform["sha256"].as_str().context("sha256")?;
        ensure!(
            sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()),
            "{os}/{arch}: sha256 {sha:?}"
        );
        ensure!(platform["bin"] == "kubectl-sched");
    }
    Ok(())
}

/// `deploy/dist.sh manifest` on DIST_DIR=dir, DIST_BASE_URL=base_url when given.
fn generate_manifest(dir: &Path, base_url: Option<&str>) -> Result<Output> {
    let mut command = Command::new(deploy_dir().join("dist.sh"));
    command
        .arg("manifest")
        .env("DIST_DIR", dir)
        .env_remove("DIST_VERSION")
        .env_remove("DIST_BASE_URL");
    if let Some(base_url) = base_url {
        command.env("DIST_BASE_URL", base_url);
    }
    command.output().context("running deploy/dist.sh manifest")
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn spec_without_platforms(manifest: &Value) -> Value {
    let mut manifest = manifest.clone();
    if let Some(spec) = manifest["spec"].as_object_mut() {
        spec.remove("platforms");
        spec.remove("version");
    }
    manifest
}

#[test]
fn dist_manifest_lists_each_archive_present_with_its_own_sha256() -> Result<()> {
    struct Case {
        name: &'static str,
        /// The Rust targets whose archives are in the directory.
        targets: &'static [&'static str],
        base_url: Option<&'static str>,
    }
    let cases = [
        Case {
            name: "what make dist builds here: linux/amd64 only",
            targets: &["x86_64-unknown-linux-musl"],
            base_url: None,
        },
        Case {
            name: "two platforms, not in the table's order",
            targets: &["aarch64-apple-darwin", "x86_64-unknown-linux-musl"],
            base_url: None,
        },
        Case {
            name: "all four, published elsewhere",
            targets: &[
                "x86_64-unknown-linux-musl",
                "aarch64-unknown-linux-musl",
                "x86_64-apple-darwin",
                "aarch64-apple-darwin",
            ],
            base_url: Some("https://example.test/sched/v9"),
        },
    ];
    let template: Value =
        yaml_serde::from_str(&std::fs::read_to_string(deploy_dir().join("krew/sched.yaml"))?)?;
    for case in cases {
        let dir = tempfile::tempdir()?;
        for target in case.targets {
            // Different bytes per archive: a sha256 taken from the wrong file cannot match.
            std::fs::write(
                dir.path().join(archive_name(target)),
                format!("archive for {target}"),
            )?;
        }
        // Neither a .sha256 file nor another version's archive is a platform.
        std::fs::write(
            dir.path().join("kubectl-sched-v0.0.1-x86_64-apple-darwin.tar.gz"),
            "old",
        )?;
        std::fs::write(
            dir.path()
                .join("sched-webhook-v0.1.0-x86_64-unknown-linux-musl.tar.gz"),
            "w",
        )?;
        let output = generate_manifest(dir.path(), case.base_url)?;
        ensure!(
            output.status.success(),
            "{}: {}",
            case.name,
            String::from_utf8_lossy(&output.stderr)
        );
        let manifest: Value = yaml_serde::from_str(&std::fs::read_to_string(dir.path().join("sched.yaml"))?)
            .with_context(|| format!("{}: the generated manifest", case.name))?;
        ensure!(
            spec_without_platforms(&manifest) == spec_without_platforms(&template),
            "{}: the plugin text differs from deploy/krew/sched.yaml's",
            case.name
        );
        ensure!(
            manifest["spec"]["version"] == version(),
            "{}: spec.version",
            case.name
        );
        let platforms = manifest["spec"]["platforms"]
            .as_array()
            .context("spec.platforms")?;
        ensure!(
            platforms.len() == case.targets.len(),
            "{}: {} platforms for {} archives",
            case.name,
            platforms.len(),
            case.targets.len()
        );
        for target in case.targets {
            let (os, arch, _) = RELEASE_TARGETS
                .iter()
                .find(|(_, _, t)| t == target)
                .context("a target of the table")?;
            let platform = platforms
                .iter()
                .find(|p| {
                    p["selector"]["matchLabels"]["os"] == *os && p["selector"]["matchLabels"]["arch"] == *arch
                })
                .with_context(|| format!("{}: no platform {os}/{arch}", case.name))?;
            let archive = archive_name(target);
            let expected_uri = match case.base_url {
                Some(base) => format!("{base}/{archive}"),
                None => format!(
                    "https://github.com/kubectl-sched/kubectl-sched/releases/download/{}/{archive}",
                    version()
                ),
            };
            ensure!(
                platform["uri"] == expected_uri.as_str(),
                "{}: {os}/{arch} uri {}",
                case.name,
                platform["uri"]
            );
            let bytes = std::fs::read(dir.path().join(&archive))?;
            ensure!(
                platform["sha256"] == sha256_hex(&bytes).as_str(),
                "{}: {os}/{arch} sha256 {} is not {archive}'s",
                case.name,
                platform["sha256"]
            );
            ensure!(platform["bin"] == "kubectl-sched", "{}: bin", case.name);
            let files: Vec<(&str, &str)> = platform["files"]
                .as_array()
                .context("files")?
                .iter()
                .map(|f| (f["from"].as_str().unwrap_or(""), f["to"].as_str().unwrap_or("")))
                .collect();
            ensure!(
                files == [("kubectl-sched", "."), ("LICENSE", ".")],
                "{}: files {files:?}",
                case.name
            );
        }
    }
    Ok(())
}

#[test]
fn dist_manifest_refuses_what_krew_could_not_install() -> Result<()> {
    struct Case {
        name: &'static str,
        files: &'static [&'static str],
        /// What the one-line error names.
        error: &'static str,
    }
    let cases = [
        Case {
            name: "no archive",
            files: &[],
            error: "no archive kubectl-sched-v0.1.0-<target>.tar.gz in",
        },
        Case {
            name: "only another version's archive",
            files: &["kubectl-sched-v0.0.1-x86_64-unknown-linux-musl.tar.gz"],
            error: "no archive kubectl-sched-v0.1.0-<target>.tar.gz in",
        },
        Case {
            name: "a target krew has no platform for",
            files: &[
                "kubectl-sched-v0.1.0-x86_64-unknown-linux-musl.tar.gz",
                "kubectl-sched-v0.1.0-x86_64-pc-windows-msvc.tar.gz",
            ],
            error: "kubectl-sched-v0.1.0-x86_64-pc-windows-msvc.tar.gz: unknown target x86_64-pc-windows-msvc",
        },
    ];
    for case in cases {
        let dir = tempfile::tempdir()?;
        for file in case.files {
            std::fs::write(dir.path().join(file), *file)?;
        }
        let output = generate_manifest(dir.path(), None)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(!output.status.success(), "{}: succeeded", case.name);
        ensure!(
            stderr.contains(&case.error.replace("v0.1.0", &version())),
            "{}: {stderr}",
            case.name
        );
        ensure!(
            !dir.path().join("sched.yaml").exists(),
            "{}: a manifest was written",
            case.name
        );
    }
    Ok(())
}
