//! The command line, as clap derive types only: parsing here, meaning in `commands`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

/// kube-scheduler's decisions, explained: why a pod is (or is not) schedulable, on every node, by every
/// plugin, with the same messages kube-scheduler writes.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-sched",
    bin_name = "kubectl-sched",
    version,
    max_term_width = 110
)]
pub struct Cli {
    /// Flags shared with kubectl.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's global flags (the ones this plugin uses).
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// kubectl's connection and impersonation flags, over the kubeconfig's.
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Namespace of the pod (default: the context's namespace; "default" with --from).
    #[arg(short = 'n', long, global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// All namespaces (triage, explain --all-pending, snapshot).
    #[arg(short = 'A', long, global = true, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// The length of time to wait before giving up on the API server, e.g. 1s, 2m, 3h; 0 means no limit.
    /// It bounds each exchange as a whole (loading the cluster: the version and every list, connections
    /// and retries included; each lookup) and each request of preempt's writes.
    #[arg(long, global = true, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// List in pages of this many objects (the API server's `limit`, as kubectl's --chunk-size); 0
    /// lists each kind in one request, decoded as it streams in. Default: 0 when the API server is
    /// 1.34 or newer (it serves such lists from its watch cache, at about half the cost of pages),
    /// else 500.
    #[arg(long, global = true, value_name = "N")]
    pub chunk_size: Option<u32>,
    /// Log verbosity on stderr: 1 loading summary and warnings, 2 timings.
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        value_name = "LEVEL",
        default_value_t = 0
    )]
    pub verbosity: u8,
}

/// kubectl's global connection and impersonation flags (cli-runtime's `ConfigFlags`, with kubectl's
/// deprecated `--username`/`--password`), accepted after the plugin name as kubectl accepts them and
/// applied over the kubeconfig as client-go's overrides are (`source::load`). Every command that talks to
/// the API server takes them: they are global.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Connection (kubectl's flags)")]
pub struct ConnectionArgs {
    /// The address and port of the Kubernetes API server
    #[arg(short = 's', long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// The name of the kubeconfig cluster to use
    #[arg(long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The name of the kubeconfig user to use
    #[arg(long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    /// Bearer token for authentication to the API server
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Username to impersonate for the operation. User could be a regular user or a service account in a
    /// namespace.
    #[arg(long = "as", global = true, value_name = "USER")]
    pub impersonate: Option<String>,
    /// Group to impersonate for the operation, this flag can be repeated to specify multiple groups.
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub impersonate_groups: Vec<String>,
    /// UID to impersonate for the operation.
    #[arg(long = "as-uid", global = true, value_name = "UID")]
    pub impersonate_uid: Option<String>,
    /// User extras to impersonate for the operation, this flag can be repeated to specify multiple
    /// values for the same key.
    #[arg(long = "as-user-extra", global = true, value_name = "KEY=VALUE")]
    pub impersonate_user_extra: Vec<String>,
    /// Path to a cert file for the certificate authority
    #[arg(long, global = true, value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,
    /// Path to a client certificate file for TLS
    #[arg(long, global = true, value_name = "FILE")]
    pub client_certificate: Option<PathBuf>,
    /// Path to a client key file for TLS
    #[arg(long, global = true, value_name = "FILE")]
    pub client_key: Option<PathBuf>,
    /// If true, the server's certificate will not be checked for validity. This will make your HTTPS
    /// connections insecure
    #[arg(long, global = true, conflicts_with = "certificate_authority")]
    pub insecure_skip_tls_verify: bool,
    /// Server name to use for server certificate validation. If it is not provided, the hostname used to
    /// contact the server is used
    #[arg(long, global = true, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Username for basic authentication to the API server
    #[arg(long, global = true, value_name = "NAME")]
    pub username: Option<String>,
    /// Password for basic authentication to the API server
    #[arg(long, global = true, value_name = "PASSWORD")]
    pub password: Option<String>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Why a pod is (or is not) schedulable: the FailedScheduling message, every node, every plugin.
    Explain(ExplainArgs),
    /// A preemption drill: the candidates, their victims, the PDB cost, the chosen node and the plan; and,
    /// when confirmed, the real thing.
    Preempt(PreemptArgs),
    /// Every pending pod at once, grouped by workload and root cause: what blocks them, on how many
    /// nodes, and the smallest change that makes them fit.
    Triage(TriageArgs),
    /// A batch through kube-scheduler's queue: the cluster's pending pods, new workloads, drained,
    /// removed or added nodes — where every pod lands, what stays Pending and why, what is preempted.
    Simulate(SimulateArgs),
    /// Save what the engine needs from the cluster as one YAML List (for explain --from).
    Snapshot(SnapshotArgs),
    /// Print a shell completion script (`kubectl`: the kubectl_complete-sched helper that makes
    /// `kubectl sched <TAB>` complete).
    Completion {
        /// The shell, or `kubectl` for kubectl's plugin completion.
        #[arg(value_enum)]
        shell: CompletionTarget,
    },
    /// kubectl's plugin completion protocol (cobra's `__complete`), run by kubectl_complete-sched.
    #[command(name = "__complete", hide = true)]
    Complete {
        /// The words after `kubectl sched`, the last one being completed.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

/// What `completion` prints a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionTarget {
    /// Bash, for `kubectl-sched` typed as one word.
    Bash,
    /// Zsh, for `kubectl-sched`.
    Zsh,
    /// Fish, for `kubectl-sched`.
    Fish,
    /// PowerShell, for `kubectl-sched`.
    Powershell,
    /// Elvish, for `kubectl-sched`.
    Elvish,
    /// The kubectl_complete-sched executable: `kubectl sched <TAB>` in every shell kubectl completes.
    Kubectl,
}

impl CompletionTarget {
    /// The clap_complete shell, or None for the kubectl helper.
    pub fn shell(self) -> Option<Shell> {
        match self {
            CompletionTarget::Bash => Some(Shell::Bash),
            CompletionTarget::Zsh => Some(Shell::Zsh),
            CompletionTarget::Fish => Some(Shell::Fish),
            CompletionTarget::Powershell => Some(Shell::PowerShell),
            CompletionTarget::Elvish => Some(Shell::Elvish),
            CompletionTarget::Kubectl => None,
        }
    }
}

/// `explain` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    /// Headline, per-node table and hints.
    Table,
    /// The table with one column per score plugin.
    Wide,
    /// The explanation as JSON.
    Json,
    /// The explanation as YAML.
    Yaml,
    /// A block to paste into a ticket: the pod, the message, a table of the first 20 nodes, the hints.
    Markdown,
}

/// `explain`'s arguments.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Exit codes: 0 done (with --exit-code: and the pod would be scheduled); 1 error (API, file, \
bad input, a what-if flag that names nothing); 2 usage; 3 with --exit-code only: the pod cannot be scheduled \
(unschedulable, gated, or its scheduling cycle fails; with --all-pending: any pod evaluated), as preempt's \
\"cannot make the pod fit\". With --watch: 0 when the pod is bound, or the watch stopped (--watch-timeout, \
Ctrl-C; with --exit-code, 3 if the pod still cannot be scheduled); 1 when the pod is deleted."
)]
pub struct ExplainArgs {
    /// The pod (NAME, or pod/NAME).
    #[arg(required_unless_present_any = ["all_pending", "filename"], conflicts_with_all = ["all_pending", "filename"])]
    pub pod: Option<String>,
    /// Read the cluster from a snapshot file (kind: List, YAML or JSON) instead of the API server.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Evaluate the pod in this file (it does not need to exist): "would it fit?"; `-` reads stdin.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "POD.yaml",
        conflicts_with = "all_pending"
    )]
    pub filename: Option<PathBuf>,
    /// A KubeSchedulerConfiguration (default: kube-scheduler's default profile).
    #[arg(long, value_name = "KSC.yaml")]
    pub config: Option<PathBuf>,
    /// The profile (schedulerName) to use instead of the pod's spec.schedulerName.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Show this node's filter verdicts and scores plugin by plugin.
    #[arg(long, value_name = "NODE", conflicts_with = "all_pending")]
    pub node: Option<String>,
    /// One line per pending pod (of -n NS, or every namespace with -A).
    #[arg(long, conflicts_with = "set")]
    pub all_pending: bool,
    /// Output format: the values below, or kubectl's name (pod/NAME lines), jsonpath=TEMPLATE,
    /// jsonpath-file=FILE, jsonpath-as-json=TEMPLATE (over the -o json document).
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "table", value_parser = OutputParser::<ExplainFormat>::default())]
    pub output: Output<ExplainFormat>,
    /// Exit with 3 when the pod cannot be scheduled, like `git diff --exit-code` (for scripts and CI).
    #[arg(long)]
    pub exit_code: bool,
    /// After the first answer, keep watching (kube-runtime watches on pods and nodes, evaluations at
    /// least 1 s apart) and print a timestamped line when the verdict or message changes; stop when the
    /// pod is bound (saying where), deleted, at --watch-timeout, or on Ctrl-C.
    #[arg(short = 'w', long, conflicts_with_all = ["all_pending", "filename", "from"])]
    pub watch: bool,
    /// With --watch: stop after this long, e.g. 30s, 10m (default: no limit).
    #[arg(long, value_name = "DURATION", requires = "watch", value_parser = parse_duration)]
    pub watch_timeout: Option<Duration>,
    /// Where the answer comes from: `cluster` asks the cluster's explainer (the aggregated API
    /// sched.kubectl-sched.io, README "In the cluster"), `local` lists the cluster and evaluates here,
    /// `auto` asks the explainer when its APIService is Available and lists otherwise (`-v 1` says
    /// which). The output is the same either way.
    #[arg(long, value_enum, value_name = "WHERE", default_value = "auto")]
    pub via: Via,
    /// Which kube-scheduler release decides.
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// Changes to the cluster and the pod, made in memory before the evaluation.
    #[command(flatten)]
    pub what_if: WhatIfArgs,
    /// Would a new node of the cluster's NodePools help.
    #[command(flatten)]
    pub node_pools: NodePoolArgs,
}

/// "Would a new node help?": what the cluster's Karpenter NodePools may launch. Without a NodePool
/// in the cluster (or the snapshot file), nothing changes.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Node pools")]
pub struct NodePoolArgs {
    /// The instance types Karpenter may launch, in the format of its KWOK provider's
    /// instance_types.json (name, offerings, architecture, operatingSystems, resources); default:
    /// the types the pools' own nodes show (README "Would a new node help?").
    #[arg(long, value_name = "FILE")]
    pub instance_types: Option<PathBuf>,
}

/// `--via`: where `explain` takes its answer from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Via {
    /// The cluster's explainer when its APIService is Available, else a listing.
    Auto,
    /// The cluster's explainer (an error when it cannot answer).
    Cluster,
    /// A listing of the cluster, evaluated here.
    Local,
}

/// What-if changes, made in memory to the loaded cluster and the pod before it is evaluated: nothing is
/// written anywhere. Resolved and applied by `source::what_if`.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "What if")]
pub struct WhatIfArgs {
    /// Change the pod: resources.requests.RES=QTY, resources.limits.RES=QTY (every container),
    /// containers[NAME].resources.requests.RES=QTY (one), nodeSelector.KEY=VALUE, priorityClassName=X,
    /// schedulerName=X. Repeatable.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub set: Vec<String>,
    /// Remove this pod from the cluster, as if deleted. Repeatable.
    #[arg(long = "without-pod", value_name = "NS/NAME")]
    pub without_pod: Vec<String>,
    /// Uncordon this node: spec.unschedulable false and its node.kubernetes.io/unschedulable taint
    /// removed. Repeatable.
    #[arg(long, value_name = "NODE")]
    pub uncordon: Vec<String>,
    /// Add COUNT empty copies of node NAME (named NAME-copy-1, ...; same labels but the hostname).
    /// Repeatable.
    #[arg(long = "add-node", value_name = "NAME=COUNT")]
    pub add_node: Vec<String>,
}

/// Which kube-scheduler release decides, shared by every command that evaluates: by default the
/// API server's (`GET /version`) or the one a snapshot file records. Resolved by `source::release`.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Kubernetes version")]
pub struct ReleaseArgs {
    /// Evaluate with this release's kube-scheduler (v1.33 to v1.37; v1.34 means its newest patch
    /// tested here, v1.34.4) instead of the API server's or the snapshot file's version.
    #[arg(long, value_name = "vX.Y[.Z]", value_parser = KubeVersionText)]
    pub kube_version: Option<String>,
    /// Feature gates as kube-scheduler's --feature-gates (A=true,B=false), over the release's
    /// defaults: what a managed cloud turned on or off.
    #[arg(long, value_name = "A=true,B=false")]
    pub feature_gates: Option<String>,
}

/// `triage` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TriageFormat {
    /// Causes, the workloads each keeps pending, and the smallest fixes.
    Table,
    /// Also every blocker per node group and every pod's name.
    Wide,
    /// The report as JSON.
    Json,
    /// The report as YAML.
    Yaml,
}

/// `triage`'s arguments.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Exit codes: 0 every triaged pod fits now (or none is pending); 1 error; 2 usage; 3 some \
pods cannot be scheduled now (as explain --exit-code)."
)]
pub struct TriageArgs {
    /// Only these workloads' pods: deployment/NAME, statefulset/NAME, replicaset/NAME, daemonset/NAME,
    /// job/NAME, pod/NAME (in -n's namespace).
    #[arg(value_name = "KIND/NAME")]
    pub workloads: Vec<String>,
    /// Only pods matching this label selector (kubectl syntax: app=web,tier!=db,env in (a,b)).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Read the cluster from a snapshot file (kind: List, YAML or JSON) instead of the API server.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// A KubeSchedulerConfiguration (default: kube-scheduler's default profile).
    #[arg(long, value_name = "KSC.yaml")]
    pub config: Option<PathBuf>,
    /// Which kube-scheduler release decides.
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// What if the cluster (and, for --set, every pending pod in scope) were different.
    #[command(flatten)]
    pub what_if: WhatIfArgs,
    /// Output format: the values below, or kubectl's name (pod/NAME lines), jsonpath=TEMPLATE,
    /// jsonpath-file=FILE, jsonpath-as-json=TEMPLATE (over the -o json document).
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "table", value_parser = OutputParser::<TriageFormat>::default())]
    pub output: Output<TriageFormat>,
}

/// `simulate` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SimulateFormat {
    /// Summary, workloads, pods left pending, victims, drains and the nodes whose load changed.
    Table,
    /// Also every pod's node and every node.
    Wide,
    /// The report as JSON.
    Json,
    /// The report as YAML.
    Yaml,
}

/// `simulate`'s arguments.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Exit codes: 0 every simulated pod is placed; 1 error; 2 usage; 3 some pods stay pending (unschedulable, gated, another scheduler's, or failed). With -f, --drain or --remove-node only those pods count (the new workloads and the evicted pods' replacements), so that a pipeline can fail on \"this drain would strand pods\" whatever else is pending."
)]
pub struct SimulateArgs {
    /// Pods and workloads to add to the queue: Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet
    /// (YAML or JSON, several documents or a List); `-` reads stdin. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filenames: Vec<PathBuf>,
    /// Replicas of every workload of -f (Deployment, ReplicaSet, StatefulSet replicas; Job parallelism).
    #[arg(long, value_name = "N", requires = "filenames", value_parser = clap::value_parser!(i32).range(0..=100_000))]
    pub replicas: Option<i32>,
    /// The most pods the workloads of -f may expand into together; more are refused before any is built.
    #[arg(long, value_name = "N", default_value_t = sched_core::simulate::workloads::DEFAULT_MAX_EXPANDED_PODS)]
    pub max_simulated_pods: usize,
    /// Read the cluster from a snapshot file (kind: List, YAML or JSON) instead of the API server.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// A KubeSchedulerConfiguration (default: kube-scheduler's default profile).
    #[arg(long, value_name = "KSC.yaml")]
    pub config: Option<PathBuf>,
    /// Drain NODE as `kubectl drain --ignore-daemonsets` would: cordon it, evict its pods (not
    /// DaemonSet or mirror pods) as the Eviction API allows under PodDisruptionBudgets; the pods their
    /// controllers recreate join the queue. Repeatable.
    #[arg(long, value_name = "NODE")]
    pub drain: Vec<String>,
    /// With --drain: also evict pods no controller manages (kubectl drain --force); nothing recreates
    /// them.
    #[arg(long, requires = "drain")]
    pub force: bool,
    /// With --drain: also evict pods with emptyDir volumes (kubectl drain --delete-emptydir-data).
    #[arg(long, requires = "drain")]
    pub delete_emptydir_data: bool,
    /// Remove NODE and its pods, as if the machine were gone; the pods their controllers recreate join
    /// the queue. Repeatable.
    #[arg(long, value_name = "NODE")]
    pub remove_node: Vec<String>,
    /// Cordon NODE (spec.unschedulable, as kubectl cordon). Repeatable.
    #[arg(long, value_name = "NODE")]
    pub cordon: Vec<String>,
    /// Add the nodes in this file (Node objects, YAML or JSON), empty.
    #[arg(long, value_name = "FILE")]
    pub add_nodes: Option<PathBuf>,
    /// Seed of the choice among nodes tied for the best score (kube-scheduler picks one at random).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// Filter and score every node for every pod, instead of kube-scheduler's sample
    /// (percentageOfNodesToScore from its rotating start index).
    #[arg(long)]
    pub all_nodes: bool,
    /// Which kube-scheduler release decides.
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// What-if changes to the cluster (and, with --set, to the pods of -f, else to every pending pod of
    /// the namespace).
    #[command(flatten)]
    pub what_if: WhatIfArgs,
    /// Output format: the values below, or kubectl's name (pod/NAME lines), jsonpath=TEMPLATE,
    /// jsonpath-file=FILE, jsonpath-as-json=TEMPLATE (over the -o json document).
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "table", value_parser = OutputParser::<SimulateFormat>::default())]
    pub output: Output<SimulateFormat>,
}

/// `preempt --dry-run` values, as kubectl spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Execute the plan (after confirmation).
    None,
    /// Only print the plan.
    Client,
    /// Send every write with dryRun=All: RBAC, PDBs and admission are checked, nothing changes.
    Server,
}

/// How `preempt` removes victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RemovalMode {
    /// A plain DELETE, as kube-scheduler does (PDBs are weighed, not enforced).
    Delete,
    /// The Eviction API, which enforces PodDisruptionBudgets (a blocked eviction stops the run).
    Evict,
}

/// `preempt` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PreemptFormat {
    /// Candidates, victims, the chosen node and the plan.
    Table,
    /// The drill (and the results after execution) as JSON.
    Json,
    /// The drill (and the results after execution) as YAML.
    Yaml,
}

/// `preempt`'s arguments.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Exit codes: 0 done (planned, executed, or nothing to do); 1 error, a run that \
stopped half-way (the report says what was done and what to do next), or a cluster that \
changed after the confirmation so that the plan shown no longer holds (nothing was written); 2 usage, including \
execution refused (no --yes without a terminal, or no cluster with --from/-f); 3 preemption cannot make \
the pod fit (not eligible, or no candidate node)."
)]
pub struct PreemptArgs {
    /// The pending pod that should preempt (NAME, or pod/NAME), or podgroup/NAME: the gang whose
    /// workload-aware preemption to drill (a pod of a gang drills its group).
    #[arg(required_unless_present = "filename", conflicts_with = "filename")]
    pub pod: Option<String>,
    /// Read the cluster from a snapshot file instead of the API server (implies --dry-run=client).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Drill preemption for the pod in this file (it does not need to exist; implies --dry-run=client);
    /// `-` reads stdin.
    #[arg(short = 'f', long = "filename", value_name = "POD.yaml")]
    pub filename: Option<PathBuf>,
    /// Preempt on this node instead of the one kube-scheduler would pick (it must be a candidate).
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// A KubeSchedulerConfiguration (default: kube-scheduler's default profile); its DefaultPreemption
    /// args (minCandidateNodes*) and filters are the ones the drill uses.
    #[arg(long, value_name = "KSC.yaml")]
    pub config: Option<PathBuf>,
    /// The profile (schedulerName) to use instead of the pod's spec.schedulerName.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// none: execute; client: only print the plan; server: send every write with dryRun=All
    /// (default: none, or client with --from/-f).
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1, require_equals = true, default_missing_value = "client")]
    pub dry_run: Option<DryRun>,
    /// delete: as kube-scheduler does; evict: through the Eviction API, which enforces PDBs.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = RemovalMode::Delete)]
    pub mode: RemovalMode,
    /// Execute without asking for confirmation (required when stdin is not a terminal): the plan just made
    /// is executed at once, every write conditioned on the objects' UID and resourceVersion.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Which kube-scheduler release decides.
    #[command(flatten)]
    pub release: ReleaseArgs,
    /// Output format: the values below, or kubectl's name (pod/NAME lines), jsonpath=TEMPLATE,
    /// jsonpath-file=FILE, jsonpath-as-json=TEMPLATE (over the -o json document).
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "table", value_parser = OutputParser::<PreemptFormat>::default())]
    pub output: Output<PreemptFormat>,
}

/// `snapshot`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct SnapshotArgs {
    /// Output format: yaml or json (JSON is faster to load for big clusters). Default: yaml, or json for
    /// an --output-file named *.json. (A value that is a file name, as -o snap.yaml, still writes that
    /// file, with a warning: use --output-file.)
    #[arg(short = 'o', long, value_name = "yaml|json")]
    pub output: Option<String>,
    /// Write to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,
}

/// `-o`: one of a command's own formats (`F`), or one of kubectl's printers over the document `-o json`
/// prints (rendered by `output::printer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<F> {
    /// The command's own format.
    Format(F),
    /// `-o name`: `pod/NAME` lines.
    Name,
    /// `-o jsonpath=TEMPLATE`, `-o jsonpath-file=FILE`, `-o jsonpath-as-json=TEMPLATE`.
    JsonPath {
        /// The template, or its file.
        source: TemplateSource,
        /// `jsonpath-as-json`: each path's results as a JSON list.
        as_json: bool,
    },
}

/// Where a JSONPath template is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateSource {
    /// Given inline.
    Inline(String),
    /// In this file (read when printing).
    File(PathBuf),
}

/// A command's formats that have a JSON one, which kubectl's printers read.
pub trait JsonFormat: ValueEnum + Copy {
    /// The JSON format.
    const JSON: Self;
}

impl<F: JsonFormat> Output<F> {
    /// The command's own format to compute the output with: JSON for kubectl's printers.
    pub fn format(&self) -> F {
        match self {
            Output::Format(format) => *format,
            Output::Name | Output::JsonPath { .. } => F::JSON,
        }
    }
}

/// kubectl's printers every evaluating command offers beside its own formats.
const KUBECTL_PRINTERS: [&str; 4] = ["jsonpath", "jsonpath-as-json", "jsonpath-file", "name"];

/// Parses `-o` as kubectl does: `name`, `jsonpath=...` (kubectl also takes the template after `=` for
/// `jsonpath-file` and `jsonpath-as-json`), or one of `F`'s names; anything else is refused in
/// kubectl's words (`unable to match a printer suitable for the output format "x", allowed formats are:
/// ...`).
#[derive(Debug, Clone, Copy)]
pub struct OutputParser<F>(std::marker::PhantomData<F>);

impl<F> Default for OutputParser<F> {
    fn default() -> Self {
        OutputParser(std::marker::PhantomData)
    }
}

impl<F: JsonFormat + Send + Sync + 'static> OutputParser<F> {
    /// The allowed formats, sorted and joined by commas as kubectl lists them.
    fn allowed() -> String {
        let mut names: Vec<String> = F::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value())
            .map(|v| v.get_name().to_string())
            .chain(KUBECTL_PRINTERS.iter().map(ToString::to_string))
            .collect();
        names.sort();
        names.join(",")
    }

    /// `text` as an output format.
    pub fn parse(text: &str) -> Result<Output<F>, String> {
        let (name, value) = match text.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (text, None),
        };
        let template = |value: Option<&str>| -> Result<String, String> {
            value
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    format!("template format specified but no template given (-o {name}=TEMPLATE)")
                })
        };
        match name {
            "name" if value.is_none() => Ok(Output::Name),
            "jsonpath" | "jsonpath-as-json" => Ok(Output::JsonPath {
                source: TemplateSource::Inline(template(value)?),
                as_json: name == "jsonpath-as-json",
            }),
            "jsonpath-file" => Ok(Output::JsonPath {
                source: TemplateSource::File(PathBuf::from(template(value)?)),
                as_json: false,
            }),
            _ => F::from_str(text, true).map(Output::Format).map_err(|_| {
                format!(
                    "unable to match a printer suitable for the output format {text:?}, allowed formats are: {}",
                    Self::allowed()
                )
            }),
        }
    }
}

impl<F: JsonFormat + Send + Sync + 'static> clap::builder::TypedValueParser for OutputParser<F> {
    type Value = Output<F>;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Output<F>, clap::Error> {
        Self::parse(&value.to_string_lossy()).map_err(|message| {
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{message}\n")).with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let own = F::value_variants().iter().filter_map(|v| v.to_possible_value());
        let printers = [
            ("name", "pod/NAME lines, as kubectl -o name"),
            (
                "jsonpath=TEMPLATE",
                "kubectl's JSONPath template over the JSON document",
            ),
            ("jsonpath-file=FILE", "the JSONPath template in FILE"),
            ("jsonpath-as-json=TEMPLATE", "each path's results as a JSON list"),
        ]
        .into_iter()
        .map(|(name, help)| clap::builder::PossibleValue::new(name).help(help));
        Some(Box::new(own.chain(printers)))
    }
}

/// `--kube-version`'s value as typed: read and checked by `source::release`, where a wrong one is a
/// one-line error; the parser only names the supported releases, for `--help` and completion.
#[derive(Debug, Clone, Copy)]
pub struct KubeVersionText;

/// The supported releases' names, made once (clap's possible values borrow `'static` names).
static SUPPORTED_NAMES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    sched_core::features::KubeVersion::SUPPORTED
        .iter()
        .map(ToString::to_string)
        .collect()
});

impl clap::builder::TypedValueParser for KubeVersionText {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            SUPPORTED_NAMES
                .iter()
                .map(|name| clap::builder::PossibleValue::new(name.as_str())),
        ))
    }
}

/// Parses kubectl's `--request-timeout`: a bare number of seconds, or Go durations like `1m30s`,
/// `500ms`, `2h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    sched_core::duration::parse_go_duration(text)
        .ok_or_else(|| format!("invalid duration {text:?}: use e.g. 30s, 1m, 1m30s, 500ms or 0"))
}

impl JsonFormat for ExplainFormat {
    const JSON: Self = ExplainFormat::Json;
}

impl JsonFormat for TriageFormat {
    const JSON: Self = TriageFormat::Json;
}

impl JsonFormat for SimulateFormat {
    const JSON: Self = SimulateFormat::Json;
}

impl JsonFormat for PreemptFormat {
    const JSON: Self = PreemptFormat::Json;
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_release_flags_are_taken_as_typed_by_every_evaluating_command() {
        for command in ["explain p", "preempt p", "triage", "simulate"] {
            let mut argv = vec!["kubectl-sched"];
            argv.extend(command.split(' '));
            // Out of range or malformed: still parsed, so that source::release says why in one line.
            for version in ["v1.34", "v1.32", "1.x"] {
                let mut argv = argv.clone();
                argv.extend(["--kube-version", version, "--feature-gates", "A=true,B=false"]);
                let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                let release = match cli.command {
                    Command::Explain(a) => a.release,
                    Command::Preempt(a) => a.release,
                    Command::Triage(a) => a.release,
                    Command::Simulate(a) => a.release,
                    _ => unreachable!(),
                };
                assert_eq!(release.kube_version.as_deref(), Some(version));
                assert_eq!(release.feature_gates.as_deref(), Some("A=true,B=false"));
            }
        }
    }

    #[test]
    fn durations_parse_like_kubectl() {
        for (text, want) in [
            ("0", Duration::ZERO),
            ("10", Duration::from_secs(10)),
            ("30s", Duration::from_secs(30)),
            ("1m30s", Duration::from_secs(90)),
            ("500ms", Duration::from_millis(500)),
            ("2h", Duration::from_secs(7200)),
            ("1.5s", Duration::from_millis(1500)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for bad in ["", "s", "10x", "1m30", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
