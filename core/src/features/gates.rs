//! The feature gates each supported release's kube-scheduler accepts in `--feature-gates`, and the
//! flag's parser with the binary's own words.
//!
//! The table is data generated from the releases themselves: `tests/controlplane/feature-gates.sh`
//! builds a small Go program against each release's module that reads the gate registry the real
//! binary fills (kube's `pkg/features` with client-go's and zpages' gates, the generic API server's,
//! component-base logs and metrics) and writes `gates/v1.X.tsv`: one line per gate with its default
//! at the binary's default compatibility version (emulation = the binary's minor, min compatibility
//! = minor − 1), its stage, whether it is locked to its default, and (1.35+) the gates it depends on.
//! The e2e test `feature_gates.rs` checks the table against each binary's `--help` and errors.
//!
//! The parser follows component-base: `compatibility/registry.go` splits the flag into components
//! (`kube:A=true` or bare `A=true`), `featuregate/feature_gate.go` `Set`/`unsafeSetFromMap` checks
//! each gate, and `apimachinery/pkg/util/errors` joins several errors as `[e1, e2]`. Upstream walks
//! Go maps, whose order is random; where that order decides which error is reported, this parser
//! takes the order the gates are written in (one of the orders the binary may take).

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use super::version::KubeVersion;

/// The generated tables, one per supported minor (`KubeVersion::SUPPORTED` order).
const TABLES: [(u32, &str); 5] = [
    (33, include_str!("gates/v1.33.tsv")),
    (34, include_str!("gates/v1.34.tsv")),
    (35, include_str!("gates/v1.35.tsv")),
    (36, include_str!("gates/v1.36.tsv")),
    (37, include_str!("gates/v1.37.tsv")),
];

/// The gates that set every alpha / beta gate not named explicitly (component-base's
/// `specialFeatures`).
const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";
/// The component prefix kube-scheduler registers (`compatibility.DefaultKubeComponent`).
const KUBE_COMPONENT: &str = "kube";

/// Most gates a release may have: the size of [`GateOverrides`]' bit sets.
pub const MAX_GATES: usize = 256;

/// A gate's maturity at the binary's default compatibility version (component-base `prerelease`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Registered for a later release: it cannot be set.
    PreAlpha,
    /// `ALPHA`.
    Alpha,
    /// `BETA`.
    Beta,
    /// General availability (upstream's empty string).
    Ga,
    /// `DEPRECATED`.
    Deprecated,
}

impl Stage {
    /// The stage as the tables (and kube-scheduler's help) spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PreAlpha => "PRE-ALPHA",
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "GA",
            Stage::Deprecated => "DEPRECATED",
        }
    }

    fn parse(text: &str) -> Option<Stage> {
        [
            Stage::PreAlpha,
            Stage::Alpha,
            Stage::Beta,
            Stage::Ga,
            Stage::Deprecated,
        ]
        .into_iter()
        .find(|stage| stage.as_str() == text)
    }
}

/// One gate of one release, at the binary's default compatibility version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSpec {
    /// The gate's name.
    pub name: &'static str,
    /// Its default.
    pub default: bool,
    /// Its stage.
    pub stage: Stage,
    /// Whether it is locked to its default (setting the other value is refused).
    pub locked: bool,
    /// The gates it needs enabled when it is enabled (1.35+), in upstream's order.
    pub dependencies: Vec<&'static str>,
}

/// Every gate one release's kube-scheduler accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseGates {
    /// The release's minor.
    pub minor: u32,
    /// The emulated version the binary reports in its PreAlpha error (`1.35`).
    pub emulation: &'static str,
    /// The min compatibility version (`1.34`).
    pub min_compatibility: &'static str,
    /// The gates, sorted by name.
    pub gates: Vec<GateSpec>,
    index: HashMap<&'static str, usize>,
}

/// A line of a generated table that cannot be read (a broken regeneration).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("core/src/features/gates/v1.{minor}.tsv line {line}: {problem}")]
pub struct TableError {
    minor: u32,
    line: usize,
    problem: String,
}

impl ReleaseGates {
    /// The table of the release whose code `version` follows: the newest supported minor not
    /// after it (the oldest for anything older).
    pub fn of(version: KubeVersion) -> &'static ReleaseGates {
        let tables = all_tables();
        let position = TABLES
            .iter()
            .rposition(|(minor, _)| *minor <= version.minor)
            .unwrap_or(0);
        &tables[position]
    }

    /// The gate of this name.
    pub fn get(&self, name: &str) -> Option<&GateSpec> {
        self.index.get(name).map(|&i| &self.gates[i])
    }

    /// The row of the gate of this name.
    fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    fn parse(minor: u32, text: &'static str) -> Result<ReleaseGates, TableError> {
        let problem = |line: usize, problem: &str| TableError {
            minor,
            line,
            problem: problem.to_string(),
        };
        let mut emulation = None;
        let mut gates = Vec::new();
        for (n, line) in text.lines().enumerate().map(|(n, l)| (n + 1, l)) {
            if let Some(header) = line.strip_prefix("# emulation ") {
                let (emu, min) = header
                    .split_once(", min compatibility ")
                    .ok_or_else(|| problem(n, "header without min compatibility"))?;
                emulation = Some((emu, min));
                continue;
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&'static str> = line.split('\t').collect();
            let [name, default, stage, locked, dependencies] = fields[..] else {
                return Err(problem(n, "expected 5 tab-separated fields"));
            };
            let boolean = |text: &str| match text {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(problem(n, "expected true or false")),
            };
            gates.push(GateSpec {
                name,
                default: boolean(default)?,
                stage: Stage::parse(stage).ok_or_else(|| problem(n, "unknown stage"))?,
                locked: boolean(locked)?,
                dependencies: dependencies.split(',').filter(|d| !d.is_empty()).collect(),
            });
        }
        let (emulation, min_compatibility) =
            emulation.ok_or_else(|| problem(0, "no \"# emulation\" header"))?;
        if gates.len() > MAX_GATES {
            return Err(problem(0, "more gates than GateOverrides can hold"));
        }
        let index = gates.iter().enumerate().map(|(i, g)| (g.name, i)).collect();
        Ok(ReleaseGates {
            minor,
            emulation,
            min_compatibility,
            gates,
            index,
        })
    }

    /// Whether `name` is on with these explicit settings: upstream's `featureEnabled` (an explicit
    /// value, else `AllAlpha`/`AllBeta` for their stage, else the default).
    fn enabled(&self, row: usize, overrides: &GateOverrides) -> bool {
        if let Some(value) = overrides.get(row) {
            return value;
        }
        let gate = &self.gates[row];
        let special = match gate.stage {
            Stage::Alpha => self.position(ALL_ALPHA),
            Stage::Beta => self.position(ALL_BETA),
            _ => None,
        };
        match special.filter(|&s| s != row).and_then(|s| overrides.get(s)) {
            Some(value) => value,
            None => gate.default,
        }
    }
}

/// Every table, parsed once. The tables are generated and checked by this module's tests; a
/// table that cannot be read leaves that release with no gates (every gate off, every
/// `--feature-gates` name unrecognized), which the tests would have caught first.
fn all_tables() -> &'static [ReleaseGates; 5] {
    static TABLES_PARSED: OnceLock<[ReleaseGates; 5]> = OnceLock::new();
    TABLES_PARSED.get_or_init(|| {
        TABLES.map(|(minor, text)| {
            ReleaseGates::parse(minor, text).unwrap_or_else(|_| ReleaseGates {
                minor,
                emulation: "",
                min_compatibility: "",
                gates: Vec::new(),
                index: HashMap::new(),
            })
        })
    })
}

/// The gates set explicitly by `--feature-gates`, by row of the release's table: kept so that the
/// gates the engine does not read are still known (a report can list them) and so that a second
/// `--feature-gates` adds to the first, as repeating the flag does upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GateOverrides {
    set: [u64; MAX_GATES / 64],
    value: [u64; MAX_GATES / 64],
}

impl GateOverrides {
    /// No gate set.
    pub const NONE: GateOverrides = GateOverrides {
        set: [0; MAX_GATES / 64],
        value: [0; MAX_GATES / 64],
    };

    fn get(&self, row: usize) -> Option<bool> {
        let (word, bit) = (row / 64, 1u64 << (row % 64));
        (self.set[word] & bit != 0).then_some(self.value[word] & bit != 0)
    }

    fn insert(&mut self, row: usize, value: bool) {
        let (word, bit) = (row / 64, 1u64 << (row % 64));
        self.set[word] |= bit;
        if value {
            self.value[word] |= bit;
        } else {
            self.value[word] &= !bit;
        }
    }

    /// Whether no gate is set.
    pub fn is_empty(&self) -> bool {
        self.set.iter().all(|w| *w == 0)
    }

    /// The gates set, with their values, in `release`'s table order (by name).
    pub fn listed(&self, release: &'static ReleaseGates) -> Vec<(&'static str, bool)> {
        (0..release.gates.len())
            .filter_map(|row| self.get(row).map(|v| (release.gates[row].name, v)))
            .collect()
    }
}

/// Why a `--feature-gates` value is refused, in kube-scheduler's words (the binary prints them as
/// `"command failed" err="…"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// A `component:` prefix other than `kube:`.
    #[error("component not registered: {0}")]
    ComponentNotRegistered(String),
    /// Gates with and without the `kube:` prefix in one value.
    #[error("set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use")]
    MixedPrefixes,
    /// `A` without `=value`.
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// A value Go's `strconv.ParseBool` does not read.
    #[error("invalid value of {gate}={value}, err: strconv.ParseBool: parsing {quoted}: invalid syntax", quoted = go_quote(value))]
    InvalidValue {
        /// The gate.
        gate: String,
        /// The value given.
        value: String,
    },
    /// A gate the release does not have.
    #[error("unrecognized feature gate: {0}")]
    Unrecognized(String),
    /// The other value of a gate locked to its default.
    #[error("cannot set feature gate {gate} to {value}, feature is locked to {locked}")]
    Locked {
        /// The gate.
        gate: String,
        /// The value asked for.
        value: bool,
        /// The value it is locked to.
        locked: bool,
    },
    /// A gate registered only for a later release.
    #[error(
        "cannot set feature gate {gate} to {value}, feature is PreAlpha at emulated version {emulation}{min_compatibility}"
    )]
    PreAlpha {
        /// The gate.
        gate: String,
        /// The value asked for.
        value: bool,
        /// The binary's emulated version.
        emulation: String,
        /// `, min compatibility version 1.34` (1.35+), or empty.
        min_compatibility: String,
    },
    /// An enabled gate whose dependencies are not all enabled (1.35+).
    #[error("{gate} is enabled, but depends on features that are disabled: [{}]", disabled.join(" "))]
    DisabledDependencies {
        /// The gate.
        gate: String,
        /// Its disabled dependencies, in upstream's order.
        disabled: Vec<String>,
    },
    /// Several of the above, as `utilerrors.NewAggregate` prints them.
    #[error("{}", aggregate(.0))]
    Several(Vec<FeatureGateError>),
}

/// `utilerrors.NewAggregate(errs).Error()`: one message alone, several deduplicated in brackets.
fn aggregate(errors: &[FeatureGateError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for message in errors.iter().map(ToString::to_string) {
        if !seen.contains(&message) {
            seen.push(message);
        }
    }
    match seen.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Go's `strconv.Quote`, as `strconv.ParseBool`'s error prints the value: ASCII control characters
/// and quotes escaped, printable text kept.
fn go_quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\u{7}' => quoted.push_str("\\a"),
            '\u{8}' => quoted.push_str("\\b"),
            '\u{c}' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\u{b}' => quoted.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => quoted.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Applies one `--feature-gates` value to `overrides`, as kube-scheduler of `release` does.
pub(super) fn apply(
    release: &'static ReleaseGates,
    overrides: GateOverrides,
    text: &str,
) -> Result<GateOverrides, FeatureGateError> {
    // compatibility/registry.go via ColonSeparatedMultimapStringString: split at ',', then at the
    // first ':' into component and gate (no ':' means the default, empty component).
    let mut bare = Vec::new();
    let mut kube = Vec::new();
    for pair in text.split(',').filter(|p| !p.is_empty()) {
        match pair.split_once(':') {
            None => bare.push(pair.trim()),
            Some((component, value)) => match component.trim() {
                KUBE_COMPONENT => kube.push(value.trim()),
                // The empty component is the default one.
                "" => bare.push(value.trim()),
                other => return Err(FeatureGateError::ComponentNotRegistered(other.to_string())),
            },
        }
    }
    if !bare.is_empty() && !kube.is_empty() {
        return Err(FeatureGateError::MixedPrefixes);
    }
    // feature_gate.go Set: the gates of the component, joined by ',' and split again.
    let mut settings: Vec<(&str, bool)> = Vec::new();
    for item in bare.into_iter().chain(kube).flat_map(|s| s.split(',')) {
        if item.is_empty() {
            continue;
        }
        let (key, value) = match item.split_once('=') {
            Some((key, value)) => (key.trim(), value.trim()),
            None => return Err(FeatureGateError::MissingValue(item.trim().to_string())),
        };
        let value = parse_go_bool(value).ok_or_else(|| FeatureGateError::InvalidValue {
            gate: key.to_string(),
            value: value.to_string(),
        })?;
        // A Go map: the last value of a key wins, at the key's first place.
        match settings.iter_mut().find(|(k, _)| *k == key) {
            Some(setting) => setting.1 = value,
            None => settings.push((key, value)),
        }
    }
    set_from_map(release, overrides, &settings)
}

/// feature_gate.go `unsafeSetFromMap`: every gate set so far and the new ones are checked again.
fn set_from_map(
    release: &'static ReleaseGates,
    mut overrides: GateOverrides,
    settings: &[(&str, bool)],
) -> Result<GateOverrides, FeatureGateError> {
    let mut errors = Vec::new();
    for &(name, value) in settings {
        let Some(row) = release.position(name) else {
            // Upstream returns at the first unknown gate, with the errors gathered before it.
            errors.push(FeatureGateError::Unrecognized(name.to_string()));
            return Err(several(errors));
        };
        let gate = &release.gates[row];
        if gate.locked && gate.default != value {
            errors.push(FeatureGateError::Locked {
                gate: name.to_string(),
                value,
                locked: gate.default,
            });
            continue;
        }
        if gate.stage == Stage::PreAlpha && name != ALL_ALPHA && name != ALL_BETA {
            errors.push(FeatureGateError::PreAlpha {
                gate: name.to_string(),
                value,
                emulation: release.emulation.to_string(),
                min_compatibility: if release.minor >= 35 {
                    format!(", min compatibility version {}", release.min_compatibility)
                } else {
                    String::new()
                },
            });
            continue;
        }
        overrides.insert(row, value);
    }
    if !errors.is_empty() {
        return Err(several(errors));
    }
    for (row, gate) in release.gates.iter().enumerate() {
        if gate.dependencies.is_empty() || !release.enabled(row, &overrides) {
            continue;
        }
        let disabled: Vec<String> = gate
            .dependencies
            .iter()
            .filter(|dep| {
                release
                    .position(dep)
                    .is_none_or(|d| !release.enabled(d, &overrides))
            })
            .map(|dep| dep.to_string())
            .collect();
        if !disabled.is_empty() {
            errors.push(FeatureGateError::DisabledDependencies {
                gate: gate.name.to_string(),
                disabled,
            });
        }
    }
    if errors.is_empty() {
        Ok(overrides)
    } else {
        Err(several(errors))
    }
}

/// One error as itself, several as their aggregate.
fn several(mut errors: Vec<FeatureGateError>) -> FeatureGateError {
    if errors.len() == 1 {
        errors.remove(0)
    } else {
        FeatureGateError::Several(errors)
    }
}

/// Whether the gate of `name` is on in `release` with `overrides` (off when the release has no
/// such gate).
pub(super) fn effective(release: &ReleaseGates, overrides: &GateOverrides, name: &str) -> Option<bool> {
    release.position(name).map(|row| release.enabled(row, overrides))
}

/// The Markdown table of docs/versions.md "Feature gates": one row per gate of `names`, one column
/// per supported release, each cell the default and stage (`–`: the release has no such gate).
pub fn markdown_table(names: &[&str]) -> String {
    let tables = all_tables();
    let mut out = String::from("| gate |");
    for release in tables {
        out.push_str(&format!(" v1.{} |", release.minor));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(tables.len()));
    out.push('\n');
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    for name in sorted {
        out.push_str(&format!("| {name} |"));
        for release in tables {
            let cell = match release.get(name) {
                None => "–".to_string(),
                Some(gate) => format!(
                    "{} ({}{})",
                    if gate.default { "on" } else { "off" },
                    gate.stage,
                    if gate.locked { ", locked" } else { "" }
                ),
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureGates;

    fn release(minor: u32) -> FeatureGates {
        FeatureGates::for_version(
            *KubeVersion::SUPPORTED
                .iter()
                .find(|v| v.minor == minor)
                .expect("a supported minor"),
        )
    }

    #[test]
    fn every_generated_table_reads_back() {
        for (minor, text) in TABLES {
            let table = ReleaseGates::parse(minor, text).unwrap_or_else(|e| panic!("{e}"));
            assert!(table.gates.len() > 100, "v1.{minor}: {} gates", table.gates.len());
            assert_eq!(table.emulation, format!("1.{minor}"));
            assert_eq!(table.min_compatibility, format!("1.{}", minor - 1));
            for gate in &table.gates {
                for dep in &gate.dependencies {
                    assert!(
                        table.get(dep).is_some(),
                        "v1.{minor}: {} needs unknown {dep}",
                        gate.name
                    );
                }
            }
        }
    }

    #[test]
    fn flag_values_are_refused_with_the_binarys_words() {
        // (minor, --feature-gates value, kube-scheduler's error)
        let cases: &[(u32, &str, &str)] = &[
            (37, "Bogus=true", "unrecognized feature gate: Bogus"),
            (37, "=true", "unrecognized feature gate: "),
            (
                33,
                "NodeDeclaredFeatures=true",
                "unrecognized feature gate: NodeDeclaredFeatures",
            ),
            (
                37,
                "SchedulerQueueingHints=true",
                "unrecognized feature gate: SchedulerQueueingHints",
            ),
            (37, "foo:Bogus=true", "component not registered: foo"),
            (
                37,
                "PodLevelResources=true,kube:StorageCapacityScoring=true",
                "set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use",
            ),
            (
                35,
                "PodLevelResources",
                "missing bool value for PodLevelResources",
            ),
            (
                33,
                "PodLevelResources=maybe",
                "invalid value of PodLevelResources=maybe, err: strconv.ParseBool: parsing \"maybe\": invalid syntax",
            ),
            (
                36,
                "kube:PodLevelResources=\"x\"",
                "invalid value of PodLevelResources=\"x\", err: strconv.ParseBool: parsing \"\\\"x\\\"\": invalid syntax",
            ),
            (
                37,
                "DynamicResourceAllocation=false",
                "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true",
            ),
            (
                35,
                "DynamicResourceAllocation=false,DRAAdminAccess=false",
                "[cannot set feature gate DynamicResourceAllocation to false, feature is locked to true, \
                 cannot set feature gate DRAAdminAccess to false, feature is locked to true]",
            ),
            (
                37,
                "DynamicResourceAllocation=false,Bogus=true",
                "[cannot set feature gate DynamicResourceAllocation to false, feature is locked to true, \
                 unrecognized feature gate: Bogus]",
            ),
        ];
        for &(minor, text, words) in cases {
            match release(minor).with_overrides(text) {
                Ok(_) => panic!("v1.{minor} {text:?}: accepted, kube-scheduler says {words:?}"),
                Err(e) => assert_eq!(e.to_string(), words, "v1.{minor} {text:?}"),
            }
        }
    }

    #[test]
    fn accepted_values_set_the_gates_the_engine_reads_and_keep_the_others() {
        let off = release(37)
            .with_overrides(" kube:PodLevelResources = false ,kube:APIResponseCompression=F,,")
            .expect("valid");
        assert!(!off.pod_level_resources);
        assert_eq!(
            off.explicitly_set(),
            vec![("APIResponseCompression", false), ("PodLevelResources", false)]
        );
        // The last value of a gate wins; a second flag adds to the first.
        let on = off
            .with_overrides("PodLevelResources=0,PodLevelResources=TRUE")
            .expect("valid");
        assert!(on.pod_level_resources);
        assert_eq!(on.explicitly_set().len(), 2);
        // Not locked on 1.34: DynamicResourceAllocation can be turned off there.
        let v1_34 = release(34)
            .with_overrides("DynamicResourceAllocation=false")
            .expect("valid");
        assert!(!v1_34.dynamic_resource_allocation);
        assert_eq!(release(34).with_overrides(""), Ok(release(34)));
    }

    #[test]
    fn all_beta_sets_the_beta_gates_not_named() {
        let gates = release(36)
            .with_overrides("AllBeta=false,PodLevelResources=true")
            .expect("valid");
        let table = gates.release_gates();
        assert_eq!(
            table.get("NodeDeclaredFeatures").map(|g| g.stage),
            Some(Stage::Beta)
        );
        assert!(!gates.node_declared_features);
        assert!(gates.pod_level_resources);
    }

    #[test]
    fn an_enabled_gate_needs_its_dependencies_from_1_35() {
        let release_37 = release(37);
        let table = release_37.release_gates();
        let (gate, deps) = table
            .gates
            .iter()
            .find(|g| !g.dependencies.is_empty() && !g.default && !g.locked && g.stage != Stage::PreAlpha)
            .map(|g| (g.name, g.dependencies.clone()))
            .expect("a gate off by default with dependencies");
        let disable: Vec<String> = deps.iter().map(|d| format!("{d}=false")).collect();
        let text = format!("{gate}=true,{}", disable.join(","));
        let refused = release_37.with_overrides(&text);
        if deps
            .iter()
            .any(|d| table.get(d).is_some_and(|g| g.locked && g.default))
        {
            return;
        }
        assert_eq!(
            refused.map(|_| ()).map_err(|e| e.to_string()),
            Err(format!(
                "{gate} is enabled, but depends on features that are disabled: [{}]",
                deps.join(" ")
            ))
        );
        let no_dependencies_before_1_35 = release(34).release_gates();
        assert!(
            no_dependencies_before_1_35
                .gates
                .iter()
                .all(|g| g.dependencies.is_empty())
        );
    }

    #[test]
    fn a_gate_registered_for_a_later_release_cannot_be_set() {
        // No supported release has one at its default compatibility version; a table that does.
        let text = "# emulation 1.35, min compatibility 1.34\nLater\tfalse\tPRE-ALPHA\tfalse\t\n";
        let v1_35: &'static ReleaseGates =
            Box::leak(Box::new(ReleaseGates::parse(35, text).expect("a table")));
        let v1_34: &'static ReleaseGates = Box::leak(Box::new(
            ReleaseGates::parse(
                34,
                "# emulation 1.34, min compatibility 1.33\nLater\tfalse\tPRE-ALPHA\tfalse\t\n",
            )
            .expect("a table"),
        ));
        let refusal = |table, text| apply(table, GateOverrides::NONE, text).map_err(|e| e.to_string());
        assert_eq!(
            refusal(v1_35, "Later=true"),
            Err(
                "cannot set feature gate Later to true, feature is PreAlpha at emulated version 1.35, \
                 min compatibility version 1.34"
                    .to_string()
            )
        );
        assert_eq!(
            refusal(v1_34, "Later=false"),
            Err(
                "cannot set feature gate Later to false, feature is PreAlpha at emulated version 1.34"
                    .to_string()
            )
        );
    }

    #[test]
    fn go_quote_escapes_as_strconv_quote() {
        assert_eq!(go_quote("maybe"), "\"maybe\"");
        assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(go_quote("é"), "\"é\"");
    }
}
