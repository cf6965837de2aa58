//! Completion for `kubectl sched ...` through kubectl's plugin completion (kubectl ≥ 1.26): kubectl runs
//! an executable named `kubectl_complete-sched` with the words typed after `kubectl sched` (the last one
//! being the word under the cursor) and reads cobra's `__complete` protocol back: one candidate per line
//! (`value<TAB>description`), then `:<directive>`. The candidates come from the clap command tree, so
//! they never drift from the real flags.
//!
//! Pod names (`explain`, `preempt`) and workloads (`triage`) come from the cluster: the pods of the
//! namespace that `-n`/`--namespace` names among the words (else the kubeconfig context's), through the
//! `--kubeconfig` and `--context` among the words. That one LIST is bounded (a page of [`POD_LIMIT`],
//! [`LOOKUP_TIMEOUT`]), and any failure (no kubeconfig, API server down, forbidden) yields no
//! candidates: completion never prints an error.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, Command, ValueHint};
use k8s_openapi::api::core::v1::Pod;
use sched_core::triage::workload::WorkloadIndex;
use sched_core::{ClusterObjects, PodInfo, Snapshot};

use crate::cli::GlobalArgs;
use crate::source::load::Cluster;

/// cobra's ShellCompDirectiveDefault: the shell may fall back to file names.
const DIRECTIVE_DEFAULT: u32 = 0;
/// cobra's ShellCompDirectiveNoSpace: no space after the candidate (a `deployment/` prefix).
const DIRECTIVE_NO_SPACE: u32 = 2;
/// cobra's ShellCompDirectiveNoFileComp: no file-name fallback.
const DIRECTIVE_NO_FILE_COMP: u32 = 4;

/// At most this many pods are listed (one page): enough to complete from, and a bounded answer.
pub const POD_LIMIT: u32 = 500;
/// Bounds connecting and listing: a TAB must not hang on an API server that does not answer.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// The workload kinds `triage` takes, as completed before a name.
const WORKLOAD_KINDS: [&str; 6] = [
    "deployment",
    "statefulset",
    "replicaset",
    "daemonset",
    "job",
    "pod",
];

/// Where the words say the cluster is: kubectl's flags among them (none: kubectl's defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `-n`/`--namespace` (none: the context's namespace).
    pub namespace: Option<String>,
}

/// A pod as completion shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCandidate {
    /// Its name.
    pub name: String,
    /// The node it is bound to (none: pending).
    pub node: Option<String>,
    /// Its workload, `kind/name` (`pod/NAME` for a pod no controller owns).
    pub workload: String,
}

/// The cluster as completion reads it: the live pods of the target's namespace, or none at all when
/// they cannot be read.
pub trait PodSource {
    /// The pods (none on any failure).
    fn pods(&self, target: &Target) -> Vec<PodCandidate>;
}

/// [`PodSource`] from the API server.
#[derive(Debug, Clone, Copy, Default)]
pub struct Live;

impl PodSource for Live {
    fn pods(&self, target: &Target) -> Vec<PodCandidate> {
        let global = GlobalArgs {
            kubeconfig: target.kubeconfig.clone(),
            context: target.context.clone(),
            namespace: target.namespace.clone(),
            all_namespaces: false,
            request_timeout: LOOKUP_TIMEOUT,
            chunk_size: None,
            verbosity: 0,
        };
        let Ok(cluster) = Cluster::connect(&global) else {
            return Vec::new();
        };
        let namespace = target
            .namespace
            .clone()
            .unwrap_or_else(|| cluster.default_namespace.clone());
        match cluster.live_pods(&namespace, POD_LIMIT, LOOKUP_TIMEOUT) {
            Ok(pods) => candidates(pods),
            Err(_) => Vec::new(),
        }
    }
}

/// The pods as candidates, pending ones first (the ones explain and preempt are usually asked about),
/// each group by name.
fn candidates(pods: Vec<Pod>) -> Vec<PodCandidate> {
    // Only the pods' owner references and labels are read: no ReplicaSet is listed, a Deployment is
    // recognised by the pod-template-hash suffix of its ReplicaSet's name.
    let index = WorkloadIndex::new(&Snapshot::new(ClusterObjects::default()));
    let mut out: Vec<PodCandidate> = pods
        .into_iter()
        .map(|pod| {
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty());
            let name = pod.metadata.name.clone().unwrap_or_default();
            let workload = index.workload_of(&PodInfo::new(pod));
            PodCandidate {
                name,
                node,
                workload: workload.to_string(),
            }
        })
        .collect();
    out.sort_by(|a, b| (a.node.is_some(), &a.name).cmp(&(b.node.is_some(), &b.name)));
    out
}

/// The script to install as `kubectl_complete-sched` on PATH.
pub const KUBECTL_PLUGIN_SCRIPT: &str = "#!/bin/sh\n\
# kubectl (1.26 or newer) runs this to complete `kubectl sched ...`: install it on your PATH as\n\
# kubectl_complete-sched (chmod +x), next to kubectl-sched.\n\
exec kubectl-sched __complete \"$@\"\n";

/// The candidates and cobra's directive for `words` (the last word is the one being completed; an empty
/// last word means the cursor is after a space); pods are read from `source` only when a pod or
/// workload argument is being completed.
pub fn complete(root: &Command, words: &[String], source: &dyn PodSource) -> (Vec<String>, u32) {
    let (current, before) = match words.split_last() {
        Some((current, before)) => (current.as_str(), before),
        None => ("", &[][..]),
    };
    let mut command = root.clone();
    command.build();
    let mut path: Vec<Command> = vec![command];
    let mut pending_value: Option<Arg> = None;
    let mut target = Target::default();
    // Positional words after the innermost subcommand.
    let mut positionals = 0;
    for word in before {
        let Some(here) = path.last() else { break };
        if let Some(arg) = pending_value.take() {
            target.record(&arg, word);
            continue;
        }
        if word == "--" {
            break;
        }
        if let Some(name) = word.strip_prefix("--") {
            match name.split_once('=') {
                Some((name, value)) => {
                    if let Some(arg) = find_long(&path, name) {
                        target.record(arg, value);
                    }
                }
                None => {
                    if let Some(arg) = find_long(&path, name)
                        && takes_value(arg)
                    {
                        pending_value = Some(arg.clone());
                    }
                }
            }
            continue;
        }
        if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            // -n NS, or -nNS: only a last short flag without an attached value waits for one.
            if let Some(c) = shorts.chars().next()
                && let Some(arg) = find_short(&path, c)
                && takes_value(arg)
            {
                let attached = &shorts[c.len_utf8()..];
                let attached = attached.strip_prefix('=').unwrap_or(attached);
                if attached.is_empty() {
                    pending_value = Some(arg.clone());
                } else {
                    target.record(arg, attached);
                }
            }
            continue;
        }
        match here.find_subcommand(word) {
            Some(sub) => {
                let sub = sub.clone();
                path.push(sub);
                positionals = 0;
            }
            None => positionals += 1,
        }
    }

    if let Some(arg) = pending_value {
        return values_of(&arg, "");
    }
    if let Some(rest) = current.strip_prefix("--")
        && let Some((name, partial)) = rest.split_once('=')
    {
        return match find_long(&path, name) {
            Some(arg) => {
                let (values, directive) = values_of(arg, partial);
                let values = values.into_iter().map(|v| format!("--{name}={v}")).collect();
                (values, directive)
            }
            None => (Vec::new(), DIRECTIVE_NO_FILE_COMP),
        };
    }
    if current.starts_with('-') {
        let mut flags: Vec<String> = Vec::new();
        for (depth, command) in path.iter().enumerate() {
            let innermost = depth + 1 == path.len();
            for arg in command.get_arguments() {
                if arg.is_hide_set() || arg.is_positional() || (!innermost && !arg.is_global_set()) {
                    continue;
                }
                let help = describe(arg);
                if let Some(long) = arg.get_long() {
                    flags.push(with_help(&format!("--{long}"), &help));
                }
                if let Some(short) = arg.get_short() {
                    flags.push(with_help(&format!("-{short}"), &help));
                }
            }
        }
        flags.sort();
        flags.dedup();
        let flags = flags
            .into_iter()
            .filter(|f| candidate_value(f).starts_with(current))
            .collect();
        return (flags, DIRECTIVE_NO_FILE_COMP);
    }
    let Some(here) = path.last() else {
        return (Vec::new(), DIRECTIVE_NO_FILE_COMP);
    };
    let subcommands: Vec<String> = here
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help" && s.get_name().starts_with(current))
        .map(|s| {
            with_help(
                s.get_name(),
                &s.get_about().map(|a| a.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    if !subcommands.is_empty() || path.len() == 1 {
        return (subcommands, DIRECTIVE_NO_FILE_COMP);
    }
    // A positional: a pod or a workload, from the cluster; the shell (for `completion`) has fixed values.
    match here.get_name() {
        "explain" | "preempt" if positionals == 0 => {
            return (pod_names(&source.pods(&target), current), DIRECTIVE_NO_FILE_COMP);
        }
        "explain" | "preempt" => return (Vec::new(), DIRECTIVE_NO_FILE_COMP),
        "triage" => return workloads(current, source, &target),
        _ => {}
    }
    match here
        .get_positionals()
        .find(|a| !a.get_possible_values().is_empty())
    {
        Some(arg) => values_of(arg, current),
        None => (Vec::new(), DIRECTIVE_NO_FILE_COMP),
    }
}

impl Target {
    /// Keeps `value` when `arg` is one of the flags that say where the cluster is.
    fn record(&mut self, arg: &Arg, value: &str) {
        let value = value.to_string();
        match arg.get_id().as_str() {
            "kubeconfig" => self.kubeconfig = Some(PathBuf::from(value)),
            "context" => self.context = Some(value),
            "namespace" => self.namespace = Some(value),
            _ => {}
        }
    }
}

/// The pods whose names start with `partial` (a `pod/` prefix is kept), described as pending or by
/// their node.
fn pod_names(pods: &[PodCandidate], partial: &str) -> Vec<String> {
    let (prefix, partial) = match partial.strip_prefix("pod/") {
        Some(rest) => ("pod/", rest),
        None => ("", partial),
    };
    pods.iter()
        .filter(|p| p.name.starts_with(partial))
        .map(|p| {
            let help = match &p.node {
                Some(node) => format!("on {node}"),
                None => "Pending".to_string(),
            };
            with_help(&format!("{prefix}{}", p.name), &help)
        })
        .collect()
}

/// `triage`'s KIND/NAME arguments: the kinds (no space after the slash), then, after a kind, the
/// workloads of the pending pods (what triage looks at).
fn workloads(current: &str, source: &dyn PodSource, target: &Target) -> (Vec<String>, u32) {
    let Some((kind, _)) = current.split_once('/') else {
        let kinds = WORKLOAD_KINDS
            .iter()
            .filter(|k| k.starts_with(current))
            .map(|k| format!("{k}/"))
            .collect();
        return (kinds, DIRECTIVE_NO_SPACE | DIRECTIVE_NO_FILE_COMP);
    };
    if !WORKLOAD_KINDS.contains(&kind) {
        return (Vec::new(), DIRECTIVE_NO_FILE_COMP);
    }
    let pods = source.pods(target);
    let mut counts: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for pod in pods.iter().filter(|p| p.node.is_none()) {
        let workload = if kind == "pod" {
            format!("pod/{}", pod.name)
        } else {
            pod.workload.clone()
        };
        if workload.starts_with(current) && workload.starts_with(&format!("{kind}/")) {
            *counts.entry(workload).or_default() += 1;
        }
    }
    let candidates = counts
        .into_iter()
        .map(|(workload, n)| with_help(&workload, &format!("{n} pending pod(s)")))
        .collect();
    (candidates, DIRECTIVE_NO_FILE_COMP)
}

/// Renders the protocol's output.
pub fn render(candidates: &[String], directive: u32) -> String {
    let mut out = String::new();
    for candidate in candidates {
        out.push_str(candidate);
        out.push('\n');
    }
    out.push_str(&format!(":{directive}\n"));
    out
}

fn takes_value(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Set | ArgAction::Append)
        && arg.get_num_args().is_none_or(|n| n.min_values() > 0)
}

fn find_long<'c>(path: &'c [Command], name: &str) -> Option<&'c Arg> {
    path.iter()
        .rev()
        .find_map(|c| c.get_arguments().find(|a| a.get_long() == Some(name)))
}

fn find_short(path: &[Command], c: char) -> Option<&Arg> {
    path.iter()
        .rev()
        .find_map(|cmd| cmd.get_arguments().find(|a| a.get_short() == Some(c)))
}

fn values_of(arg: &Arg, partial: &str) -> (Vec<String>, u32) {
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set() && v.get_name().starts_with(partial))
        .map(|v| {
            with_help(
                v.get_name(),
                &v.get_help().map(|h| h.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    if !values.is_empty() {
        return (values, DIRECTIVE_NO_FILE_COMP);
    }
    let is_path = arg.get_value_hint() == ValueHint::FilePath
        || arg.get_value_hint() == ValueHint::AnyPath
        || arg
            .get_value_names()
            .is_some_and(|names| names.iter().any(|n| n.contains("FILE") || n.contains(".yaml")));
    if is_path {
        (Vec::new(), DIRECTIVE_DEFAULT)
    } else {
        (Vec::new(), DIRECTIVE_NO_FILE_COMP)
    }
}

fn describe(arg: &Arg) -> String {
    arg.get_help().map(|h| h.to_string()).unwrap_or_default()
}

fn with_help(value: &str, help: &str) -> String {
    // The first line, without its final period, as cobra's descriptions read.
    let help = help.lines().next().unwrap_or("").trim_end_matches('.');
    if help.is_empty() {
        value.to_string()
    } else {
        format!("{value}\t{help}")
    }
}

fn candidate_value(line: &str) -> &str {
    line.split('\t').next().unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::Cli;

    /// A cluster of three pods in whatever namespace is asked; remembers where it was asked.
    #[derive(Default)]
    struct Fake {
        asked: std::cell::RefCell<Vec<Target>>,
    }

    impl PodSource for Fake {
        fn pods(&self, target: &Target) -> Vec<PodCandidate> {
            self.asked.borrow_mut().push(target.clone());
            let pod = |name: &str, node: Option<&str>, workload: &str| PodCandidate {
                name: name.into(),
                node: node.map(Into::into),
                workload: workload.into(),
            };
            vec![
                pod("web-1", None, "deployment/web"),
                pod("web-2", None, "deployment/web"),
                pod("db-0", None, "statefulset/db"),
                pod("api-1", Some("n1"), "deployment/api"),
            ]
        }
    }

    fn words(line: &str) -> Vec<String> {
        if line.is_empty() {
            return vec![String::new()];
        }
        line.split(' ').map(str::to_string).collect()
    }

    fn run(line: &str) -> (Vec<String>, u32) {
        run_with(line, &Fake::default())
    }

    fn run_with(line: &str, source: &Fake) -> (Vec<String>, u32) {
        let (candidates, directive) = complete(&Cli::command(), &words(line), source);
        (
            candidates
                .iter()
                .map(|c| candidate_value(c).to_string())
                .collect(),
            directive,
        )
    }

    #[test]
    fn kube_version_completes_the_supported_releases() {
        let all = ["v1.33.13", "v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2"];
        assert_eq!(
            run("explain p --kube-version "),
            (all.map(String::from).to_vec(), DIRECTIVE_NO_FILE_COMP)
        );
        let (values, _) = run("simulate --kube-version=v1.3");
        assert_eq!(values, all.map(|v| format!("--kube-version={v}")).to_vec());
    }

    #[test]
    fn completes_words_from_the_command_tree() {
        let cases: Vec<(&str, Vec<&str>, u32)> = vec![
            (
                "",
                vec![
                    "explain",
                    "preempt",
                    "triage",
                    "simulate",
                    "snapshot",
                    "completion",
                ],
                4,
            ),
            ("ex", vec!["explain"], 4),
            (
                "explain p -o ",
                vec!["table", "wide", "json", "yaml", "markdown"],
                4,
            ),
            ("explain p --output=j", vec!["--output=json"], 4),
            (
                "preempt p --dry-run=",
                vec!["--dry-run=none", "--dry-run=client", "--dry-run=server"],
                4,
            ),
            ("preempt p --mode ", vec!["delete", "evict"], 4),
            ("preempt p -o ", vec!["table", "json", "yaml"], 4),
            ("explain --all-p", vec!["--all-pending"], 4),
            ("preempt --y", vec!["--yes"], 4),
            // Global flags are offered under a subcommand; its own flags only there.
            ("explain --kubec", vec!["--kubeconfig"], 4),
            ("--all-p", vec![], 4),
            // Paths fall back to the shell's file completion.
            ("explain p --from ", vec![], 0),
            ("explain -f ", vec![], 0),
            ("--kubeconfig ", vec![], 0),
            // A flag's value is not taken for a subcommand.
            (
                "-n explain ",
                vec![
                    "explain",
                    "preempt",
                    "triage",
                    "simulate",
                    "snapshot",
                    "completion",
                ],
                4,
            ),
            ("-n shop explain p --config ", vec![], 0),
            (
                "completion ",
                vec!["bash", "elvish", "fish", "kubectl", "powershell", "zsh"],
                4,
            ),
            // Pods of the cluster, as the fake lists them: pending first.
            ("explain ", vec!["web-1", "web-2", "db-0", "api-1"], 4),
            ("explain w", vec!["web-1", "web-2"], 4),
            ("preempt pod/d", vec!["pod/db-0"], 4),
            ("explain web-1 ", vec![], 4),
            ("explain web-1 --node n1 ", vec![], 4),
            // Workloads: the kinds, then the pending pods' workloads.
            (
                "triage ",
                vec![
                    "deployment/",
                    "statefulset/",
                    "replicaset/",
                    "daemonset/",
                    "job/",
                    "pod/",
                ],
                6,
            ),
            ("triage de", vec!["deployment/"], 6),
            ("triage deployment/", vec!["deployment/web"], 4),
            ("triage deployment/web statefulset/", vec!["statefulset/db"], 4),
            ("triage pod/w", vec!["pod/web-1", "pod/web-2"], 4),
            ("triage cronjob/", vec![], 4),
        ];
        for (line, want, directive) in cases {
            let (mut got, d) = run(line);
            let mut want: Vec<String> = want.into_iter().map(str::to_string).collect();
            if line.starts_with("completion") {
                got.sort();
                want.sort();
            }
            assert_eq!(got, want, "{line:?}");
            assert_eq!(d, directive, "{line:?}");
        }
    }

    #[test]
    fn flags_carry_their_help_and_the_protocol_ends_with_the_directive() {
        let (candidates, directive) = complete(
            &Cli::command(),
            &["explain".into(), "--all-pen".into()],
            &Fake::default(),
        );
        assert_eq!(
            candidates,
            ["--all-pending\tOne line per pending pod (of -n NS, or every namespace with -A)"]
        );
        assert_eq!(
            render(&candidates, directive),
            "--all-pending\tOne line per pending pod (of -n NS, or every namespace with -A)\n:4\n"
        );
    }

    #[test]
    fn pods_are_listed_where_the_words_say() {
        let cases: Vec<(&str, Target)> = vec![
            ("explain ", Target::default()),
            (
                "-n shop explain ",
                Target {
                    namespace: Some("shop".into()),
                    ..Target::default()
                },
            ),
            (
                "explain -nshop --context=prod ",
                Target {
                    namespace: Some("shop".into()),
                    context: Some("prod".into()),
                    ..Target::default()
                },
            ),
            (
                "--kubeconfig /tmp/kc preempt --namespace=a --namespace b --context c ",
                Target {
                    kubeconfig: Some("/tmp/kc".into()),
                    context: Some("c".into()),
                    namespace: Some("b".into()),
                },
            ),
            // A value that looks like a subcommand is the flag's.
            (
                "triage -n explain deployment/",
                Target {
                    namespace: Some("explain".into()),
                    ..Target::default()
                },
            ),
        ];
        for (line, want) in cases {
            let fake = Fake::default();
            run_with(line, &fake);
            assert_eq!(*fake.asked.borrow(), [want], "{line:?}");
        }
        // Flags and kinds need no cluster.
        for line in ["explain --n", "triage ", "explain p -o ", ""] {
            let fake = Fake::default();
            run_with(line, &fake);
            assert!(fake.asked.borrow().is_empty(), "{line:?}");
        }
    }

    #[test]
    fn pods_carry_where_they_are_and_pending_ones_come_first() {
        let pod = |name: &str, node: Option<&str>| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ns",
                    "labels": {"pod-template-hash": "abc12"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc12",
                        "uid": "u", "controller": true}]},
                "spec": {"nodeName": node, "containers": []},
            }))
            .unwrap()
        };
        let got = candidates(vec![pod("b", Some("n1")), pod("c", None), pod("a", None)]);
        let names: Vec<&str> = got.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "c", "b"]);
        assert_eq!(got[0].workload, "deployment/web");
        assert_eq!(pod_names(&got, ""), ["a\tPending", "c\tPending", "b\ton n1"]);
    }
}
