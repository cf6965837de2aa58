//! The engine's feature-gate table and its `--feature-gates` parser against every supported
//! release's real kube-scheduler: each ALPHA/BETA gate its `--help` lists (name, stage, default) is
//! in the table with the same stage and default, and each gate of those stages in the table is in
//! the help; and the binary's refusal of an unknown gate, a locked gate (and, where the release has
//! them, a PreAlpha gate and a gate whose dependency is off) is word for word the parser's.
//!
//! No API server is needed: kube-scheduler checks `--feature-gates` before it connects (it is given
//! a kubeconfig pointing at 127.0.0.1:1 all the same, so that a gate it accepts cannot reach
//! anything). The binaries are `make controlplane` and `make controlplane-releases`; without them
//! the test fails, naming the command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use e2e::{Binaries, pinned_version, releases};
use sched_core::features::gates::Stage;
use sched_core::features::{FeatureGates, KubeVersion};

/// How long kube-scheduler may take to refuse a flag (it refuses in well under a second).
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Every supported release: the pinned one and those under tests/controlplane/releases.
fn every_release() -> Result<Vec<(String, KubeVersion)>> {
    let pinned = pinned_version()?;
    let (pinned_minor, _) = pinned.rsplit_once('.').context("pinned version")?;
    let mut minors = releases();
    if !minors.iter().any(|m| m == pinned_minor) {
        minors.push(pinned_minor.to_string());
    }
    minors
        .into_iter()
        .map(|minor| {
            let version = match minor.as_str() {
                m if m == pinned_minor => pinned.to_string(),
                m => e2e::release_version(m)?,
            };
            let version = KubeVersion::parse(&version)?;
            Ok((minor, version))
        })
        .collect()
}

/// The kube-scheduler binary of `minor`; an error naming the build command when it is missing.
fn kube_scheduler(minor: &str) -> Result<PathBuf> {
    let binaries = Binaries::locate()
        .and_then(|b| b.with_release(minor))
        .with_context(|| {
            format!(
                "kube-scheduler of {minor} is needed: build the binaries with `make controlplane` \
                 and `make controlplane-releases`"
            )
        })?;
    Ok(binaries.path("kube-scheduler"))
}

/// The gate lines of `kube-scheduler --help`: name → (stage, default), at the default
/// compatibility version (the first of the "…, or … if --min-compatibility-version>=" variants).
fn help_gates(binary: &Path) -> Result<BTreeMap<String, (String, bool)>> {
    let output = Command::new(binary)
        .arg("--help")
        .output()
        .with_context(|| format!("running {} --help", binary.display()))?;
    let help =
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    let mut gates = BTreeMap::new();
    for line in help.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("kube:") else {
            continue;
        };
        let Some((name, spec)) = rest.split_once("=true|false (") else {
            continue;
        };
        let (stage, default) = spec
            .split_once(')')
            .map(|(inside, _)| inside)
            .and_then(|inside| inside.split_once(" - default="))
            .with_context(|| format!("help line {line:?}"))?;
        gates.insert(name.to_string(), (stage.to_string(), default == "true"));
    }
    ensure!(
        !gates.is_empty(),
        "{} --help lists no feature gate",
        binary.display()
    );
    Ok(gates)
}

#[test]
fn every_alpha_and_beta_gate_of_the_help_is_in_the_table() -> Result<()> {
    for (minor, version) in every_release()? {
        let binary = kube_scheduler(&minor)?;
        let help = help_gates(&binary)?;
        let table = FeatureGates::for_version(version).release_gates();
        for (name, (stage, default)) in &help {
            let gate = table
                .get(name)
                .with_context(|| format!("{minor}: {name} is in --help but not in the table"))?;
            ensure!(
                gate.stage.as_str() == stage && gate.default == *default,
                "{minor}: {name} is {stage} default={default} in --help, {} default={} in the table",
                gate.stage,
                gate.default
            );
        }
        for gate in &table.gates {
            if matches!(gate.stage, Stage::Alpha | Stage::Beta) {
                ensure!(
                    help.contains_key(gate.name),
                    "{minor}: {} ({}) is in the table but not in --help",
                    gate.name,
                    gate.stage
                );
            }
        }
        println!("{minor}: {} alpha/beta gates agree with --help", help.len());
    }
    Ok(())
}

/// A kubeconfig naming a server nothing listens on (loopback only).
fn unreachable_kubeconfig(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n\
         current-context: x\n",
    )?;
    Ok(path)
}

/// What kube-scheduler says when started with `--feature-gates=<value>`: the `err="…"` of its
/// "command failed" line, unquoted.
fn refusal(binary: &Path, kubeconfig: &Path, value: &str) -> Result<String> {
    let mut child = Command::new(binary)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--secure-port=0")
        .arg(format!("--feature-gates={value}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > REFUSAL_TIMEOUT {
            child.kill()?;
            child.wait()?;
            bail!(
                "{} accepted --feature-gates={value} (still running after {REFUSAL_TIMEOUT:?})",
                binary.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        !status.success(),
        "{} exited 0 with --feature-gates={value}",
        binary.display()
    );
    let line = stderr
        .lines()
        .find(|l| l.contains("\"command failed\" err=\""))
        .with_context(|| format!("no \"command failed\" line for {value:?} in:\n{stderr}"))?;
    let (_, quoted) = line.split_once(" err=\"").context("err field")?;
    let quoted = quoted.strip_suffix('"').context("closing quote")?;
    Ok(quoted.replace("\\\"", "\"").replace("\\\\", "\\"))
}

#[test]
fn the_binaries_refuse_gates_in_the_parsers_words() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let kubeconfig = unreachable_kubeconfig(dir.path())?;
    for (minor, version) in every_release()? {
        let binary = kube_scheduler(&minor)?;
        let ours = FeatureGates::for_version(version);
        let table = ours.release_gates();
        let mut values = vec![
            "NoSuchGate=true".to_string(),
            "PodLevelResources=maybe".to_string(),
        ];
        let locked = table
            .gates
            .iter()
            .find(|g| g.locked)
            .with_context(|| format!("{minor}: no locked gate in the table"))?;
        values.push(format!("{}={}", locked.name, !locked.default));
        if let Some(pre_alpha) = table.gates.iter().find(|g| g.stage == Stage::PreAlpha) {
            values.push(format!("{}=true", pre_alpha.name));
        }
        // A gate off by default whose dependencies can all be turned off, and that no gate on by
        // default depends on (upstream walks a map: with two errors their order is random).
        let needed_by_default_on = |dep: &str| {
            table
                .gates
                .iter()
                .any(|other| other.default && other.dependencies.contains(&dep))
        };
        let dependent = table.gates.iter().find(|g| {
            !g.default
                && !g.locked
                && matches!(g.stage, Stage::Alpha | Stage::Beta)
                && !g.dependencies.is_empty()
                && g.dependencies.iter().all(|d| {
                    table
                        .get(d)
                        .is_some_and(|d| !d.locked && d.stage != Stage::PreAlpha)
                })
                && !g.dependencies.iter().any(|d| needed_by_default_on(d))
        });
        if let Some(gate) = dependent {
            let off: Vec<String> = gate.dependencies.iter().map(|d| format!("{d}=false")).collect();
            values.push(format!("{}=true,{}", gate.name, off.join(",")));
        }
        for value in &values {
            let theirs = refusal(&binary, &kubeconfig, value)?;
            let mine = match ours.with_overrides(value) {
                Ok(_) => bail!("{minor}: the parser accepts {value:?}, kube-scheduler says {theirs:?}"),
                Err(e) => e.to_string(),
            };
            ensure!(
                mine == theirs,
                "{minor} --feature-gates={value}: kube-scheduler says {theirs:?}, we say {mine:?}"
            );
            println!("{minor} --feature-gates={value}: {theirs}");
        }
    }
    Ok(())
}

/// How long a kube-scheduler given an acceptable `--config` is watched before it is taken to have
/// accepted it (it builds its profiles in well under a second, then waits for the API server).
const ACCEPT_WINDOW: Duration = Duration::from_secs(5);

/// The `err="…"` of kube-scheduler's "command failed" line with `--config=<config>`, or `None`
/// when it is still running after [`ACCEPT_WINDOW`] (the profiles were built).
fn config_refusal(binary: &Path, config: &Path) -> Result<Option<String>> {
    let mut child = Command::new(binary)
        .arg(format!("--config={}", config.display()))
        .arg("--secure-port=0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let started = Instant::now();
    while child.try_wait()?.is_none() {
        if started.elapsed() > ACCEPT_WINDOW {
            child.kill()?;
            child.wait()?;
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("\"command failed\" err=\""))
        .with_context(|| {
            format!(
                "{} exited without a \"command failed\" line:\n{stderr}",
                binary.display()
            )
        })?;
    let (_, quoted) = line.split_once(" err=\"").context("err field")?;
    let quoted = quoted.strip_suffix('"').context("closing quote")?;
    Ok(Some(quoted.replace("\\\"", "\"").replace("\\\\", "\\")))
}

/// Runs every release's kube-scheduler and sched-core (with the release's defaults) on a
/// configuration per entry of `profiles` (the value of its `profiles:` key): both must accept it,
/// or refuse it with the same words. A profile kube-scheduler accepts but sched-core refuses at
/// "initializing profiles" (a plugin the release has that the engine lacks) fails too.
fn refused_alike(profiles: &[&str]) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let kubeconfig = unreachable_kubeconfig(dir.path())?;
    for (minor, version) in every_release()? {
        let binary = kube_scheduler(&minor)?;
        for (i, profiles) in profiles.iter().enumerate() {
            let config = dir.path().join(format!("config-{minor}-{i}.yaml"));
            std::fs::write(
                &config,
                format!(
                    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                     clientConnection: {{kubeconfig: '{}'}}\nleaderElection: {{leaderElect: false}}\n\
                     profiles: {profiles}\n",
                    kubeconfig.display()
                ),
            )?;
            let theirs = config_refusal(&binary, &config)?;
            let ours = sched_core::Engine::for_features(Some(&config), FeatureGates::for_version(version))
                .err()
                .map(|e| e.to_string());
            let ours = ours.map(|e| {
                e.strip_prefix(&format!("{}: ", config.display()))
                    .map(str::to_string)
                    .unwrap_or(e)
            });
            match (&theirs, &ours) {
                // A plugin the release has but kubectl-sched does not implement is refused by
                // us only, saying so; any other refusal of a profile kube-scheduler accepts fails.
                (None, Some(ours)) if !ours.contains("kubectl-sched does not implement plugin") => {
                    bail!("{minor} {profiles}: kube-scheduler accepts it, we say {ours:?}")
                }
                (None, _) => {}
                (Some(theirs), ours) => ensure!(
                    Some(theirs) == ours.as_ref(),
                    "{minor} {profiles}: kube-scheduler says {theirs:?}, we say {ours:?}"
                ),
            }
            println!("{minor} {profiles}: {}", theirs.as_deref().unwrap_or("accepted"));
        }
    }
    Ok(())
}

#[test]
fn a_profile_naming_a_plugin_the_release_lacks_is_refused_in_its_words() -> Result<()> {
    // Plugins added after v1.33 (names.rs ADDED_AFTER_V1_33) and one no release has, at MultiPoint
    // (checked as PreFilter) and at an explicit point.
    let plugins = [
        "multiPoint: {enabled: [{name: NodeDeclaredFeatures}]}",
        "filter: {enabled: [{name: NodeDeclaredFeatures}]}",
        "multiPoint: {enabled: [{name: DeferredPodScheduling}]}",
        "multiPoint: {enabled: [{name: PodGroupPodsCount}]}",
        "filter: {enabled: [{name: NoSuchPlugin}]}",
    ];
    let profiles: Vec<String> = plugins
        .iter()
        .map(|plugins| format!("[{{schedulerName: default-scheduler, plugins: {{{plugins}}}}}]"))
        .collect();
    refused_alike(&profiles.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Configuration validation whose words or rules differ by release: the queue sort every profile
/// must share (JSON or Go syntax), a score shape out of order, NodeResourcesFitArgs' ratio.
#[test]
fn configurations_are_validated_in_each_releases_words() -> Result<()> {
    let fit = |strategy: &str| {
        format!(
            "[{{schedulerName: default-scheduler, pluginConfig: [{{name: NodeResourcesFit, args: {{scoringStrategy: {strategy}}}}}]}}]"
        )
    };
    let unsorted = fit(
        "{type: RequestedToCapacityRatio, resources: [{name: cpu, weight: 1}], requestedToCapacityRatio: \
         {shape: [{utilization: 50, score: 1}, {utilization: 50, score: 2}]}}",
    );
    let unused = fit(
        "{type: MostAllocated, resources: [{name: cpu, weight: 1}], requestedToCapacityRatio: \
         {shape: [{utilization: 10, score: 1}]}}",
    );
    refused_alike(&[
        "[{schedulerName: a}, {schedulerName: b, plugins: {queueSort: {enabled: [{name: Foo}], disabled: [{name: '*'}]}}}]",
        "[{schedulerName: a, plugins: {queueSort: {enabled: [{name: Foo}], disabled: [{name: '*'}]}}}, {schedulerName: b}]",
        "[{schedulerName: a, plugins: {queueSort: {enabled: [{name: PrioritySort}]}}}, {schedulerName: b, plugins: {queueSort: {enabled: [{name: PrioritySort, weight: 0}]}}}]",
        &unsorted,
        &unused,
    ])
}
