//! Command line (clap derive). Every flag of `serve` also reads an environment variable
//! (`SCHED_WEBHOOK_*`), as Deployments usually set them.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// sched-webhook: volume pre-binding and nomination clearing at admission.
#[derive(Debug, Parser)]
#[command(name = "sched-webhook", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the webhook (TLS) and the admin port (plain HTTP).
    Serve(ServeArgs),
    /// Generate a CA and a serving certificate; optionally install the MutatingWebhookConfiguration.
    Certs(CertsArgs),
    /// Serve `kubectl sched explain` as the aggregated API sched.kubectl-sched.io/v1alpha1, from a
    /// snapshot kept current by watches (a Deployment of its own; see docs/architecture.md).
    Explainer(ExplainerArgs),
}

/// `explainer`.
#[derive(Debug, Args)]
pub struct ExplainerArgs {
    /// Address of the API port (TLS; only the API server's front proxy gets through the handshake).
    #[arg(long, env = "SCHED_EXPLAINER_LISTEN", default_value = "0.0.0.0:6443")]
    pub listen: SocketAddr,
    /// Address of the admin port: /healthz, /readyz, /metrics (the pending-reason metrics; plain HTTP).
    #[arg(long, env = "SCHED_EXPLAINER_ADMIN_LISTEN", default_value = "127.0.0.1:8081")]
    pub admin_listen: SocketAddr,
    /// Serving certificate (PEM), for the name the APIService's Service has.
    #[arg(long, env = "SCHED_EXPLAINER_TLS_CERT")]
    pub tls_cert: PathBuf,
    /// Serving key (PEM).
    #[arg(long, env = "SCHED_EXPLAINER_TLS_KEY")]
    pub tls_key: PathBuf,
    /// Where to write the front proxy's client CA read from the API server's
    /// kube-system/extension-apiserver-authentication ConfigMap (a writable directory).
    #[arg(long, env = "SCHED_EXPLAINER_WORK_DIR", default_value = "/tmp")]
    pub work_dir: PathBuf,
    /// Open connections on the API port; one more is closed as soon as it is accepted.
    #[arg(long, env = "SCHED_EXPLAINER_MAX_CONNECTIONS", default_value_t = crate::explainer::serve::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..=4096).map(|n| n as usize))]
    pub max_connections: usize,
    /// Explanations evaluated at once (each copies the snapshot); more wait up to 10 s, then 429.
    #[arg(long, env = "SCHED_EXPLAINER_CONCURRENT_EVALUATIONS", default_value_t = crate::explainer::api::DEFAULT_CONCURRENT_EVALUATIONS,
          value_parser = clap::value_parser!(u32).range(1..=64).map(|n| n as usize))]
    pub concurrent_evaluations: usize,
    /// Kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster ServiceAccount).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address of the webhook port (TLS only).
    #[arg(long, env = "SCHED_WEBHOOK_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Address of the admin port: /healthz, /readyz, /metrics (plain HTTP).
    #[arg(long, env = "SCHED_WEBHOOK_ADMIN_LISTEN", default_value = "127.0.0.1:8080")]
    pub admin_listen: SocketAddr,
    /// Serving certificate (PEM); reloaded when the file changes.
    #[arg(long, env = "SCHED_WEBHOOK_TLS_CERT")]
    pub tls_cert: PathBuf,
    /// Serving key (PEM); reloaded when the file changes.
    #[arg(long, env = "SCHED_WEBHOOK_TLS_KEY")]
    pub tls_key: PathBuf,
    /// CA bundle (PEM) that callers must present a client certificate from (mutual TLS): when set,
    /// a caller without a certificate this CA signed fails the TLS handshake. Configure the API
    /// server's AdmissionConfiguration to present one (docs/webhook.md, "Who can call the
    /// webhook"). Reloaded with the pair.
    #[arg(long, env = "SCHED_WEBHOOK_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// How often the certificate files are checked for changes (e.g. 10s, 500ms; at most 1h), or
    /// `never` to serve the files read at start until the process ends.
    #[arg(long, env = "SCHED_WEBHOOK_CERT_RELOAD_INTERVAL", default_value = "10s", value_parser = parse_reload_interval)]
    pub cert_reload_interval: ReloadInterval,
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "SCHED_WEBHOOK_MAX_BODY_BYTES", default_value_t = crate::server::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// How long in-flight requests may take to finish after SIGTERM (0 to 1h; keep it below the
    /// pod's terminationGracePeriodSeconds minus the preStop sleep).
    #[arg(long, env = "SCHED_WEBHOOK_SHUTDOWN_GRACE", default_value = "20s", value_parser = parse_grace)]
    pub shutdown_grace: Duration,
    /// Open connections on the webhook port; one more is closed as soon as it is accepted.
    #[arg(long, env = "SCHED_WEBHOOK_MAX_CONNECTIONS", default_value_t = crate::serving::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..=65_536).map(|n| n as usize))]
    pub max_connections: usize,
    /// Time for a caller's TLS handshake.
    #[arg(long, env = "SCHED_WEBHOOK_TLS_HANDSHAKE_TIMEOUT", default_value = "5s", value_parser = parse_timeout)]
    pub tls_handshake_timeout: Duration,
    /// Time for a request's headers (HTTP/1.1: also how long a keep-alive connection may wait for
    /// its next request; HTTP/2: for a new connection's first request).
    #[arg(long, env = "SCHED_WEBHOOK_HEADER_READ_TIMEOUT", default_value = "5s", value_parser = parse_timeout)]
    pub header_read_timeout: Duration,
    /// Time for a request's body once its headers are in; a late body is answered 400 and the
    /// connection closed.
    #[arg(long, env = "SCHED_WEBHOOK_BODY_READ_TIMEOUT", default_value = "5s", value_parser = parse_timeout)]
    pub body_read_timeout: Duration,
    /// Time a connection may stay without a request in flight (HTTP/2 gets a GOAWAY).
    #[arg(long, env = "SCHED_WEBHOOK_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_timeout)]
    pub idle_timeout: Duration,
    /// /readyz fails while a watch of the caches has kept failing for longer than this (the cache no
    /// longer follows the cluster); it recovers at the watch's next event, or 100 s after its last
    /// error.
    #[arg(long, env = "SCHED_WEBHOOK_WATCH_FAILURE_THRESHOLD", default_value = "30s", value_parser = parse_timeout)]
    pub watch_failure_threshold: Duration,
    /// /healthz fails once the main runtime's heartbeat (a task ticking every second) is older than
    /// this: every worker is blocked, and the kubelet should restart the container.
    #[arg(long, env = "SCHED_WEBHOOK_HEARTBEAT_TIMEOUT", default_value = "30s", value_parser = parse_timeout)]
    pub heartbeat_timeout: Duration,
    /// /readyz and /healthz fail once an input stream has stalled for longer than this: the
    /// reflectors' runtime stopped running, or the controller stopped taking the pods queued for it
    /// (a quiet cluster is not a stall). The replica no longer follows the cluster; a restart does.
    #[arg(long, env = "SCHED_WEBHOOK_STALL_THRESHOLD", default_value = "60s", value_parser = parse_timeout)]
    pub stall_threshold: Duration,
    /// KubeSchedulerConfiguration the engine evaluates opted-in pods and nominations with (default:
    /// kube-scheduler's defaults). Pods whose schedulerName names none of its profiles are another
    /// scheduler's: left alone, as kube-scheduler ignores them.
    #[arg(long, env = "SCHED_WEBHOOK_SCHEDULER_CONFIG")]
    pub scheduler_config: Option<PathBuf>,
    /// Kubeconfig (default: $KUBECONFIG, which may list several files, then ~/.kube/config, then the
    /// in-cluster ServiceAccount).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Namespaces whose pods the controller pre-binds volumes for, as a label selector
    /// (`key=value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`, `!key`, comma-separated;
    /// every namespace has its name as `kubernetes.io/metadata.name`). Keep it the same as the
    /// MutatingWebhookConfiguration's namespaceSelector.
    #[arg(
        long,
        env = "SCHED_WEBHOOK_NAMESPACE_SELECTOR",
        default_value = "kubernetes.io/metadata.name!=kube-system,kubectl-sched.dev/webhook!=ignore",
        value_parser = parse_label_selector
    )]
    pub namespace_selector: LabelSelector,
    /// The coordination.k8s.io Lease that elects the one replica that writes.
    #[arg(long, env = "SCHED_WEBHOOK_LEASE_NAME", default_value = "sched-webhook")]
    pub lease_name: String,
    /// The Lease's namespace (in a Deployment: the pod's own, from the downward API).
    #[arg(long, env = "POD_NAMESPACE", default_value = "sched-webhook")]
    pub lease_namespace: String,
    /// This replica's name in the Lease (in a Deployment: the pod name, from the downward API;
    /// default: the host name).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Lease duration: after a leader dies, another replica writes within about this long.
    #[arg(long, env = "SCHED_WEBHOOK_LEASE_DURATION", default_value = "15s", value_parser = parse_lease_duration)]
    pub lease_duration: Duration,
    /// Claims of one pod considered; pods with more are left to the scheduler unread.
    #[arg(long, env = "SCHED_WEBHOOK_MAX_CLAIMS", default_value_t = crate::server::DEFAULT_MAX_CLAIMS,
          value_parser = clap::value_parser!(u32).range(1..=100_000).map(|n| n as usize))]
    pub max_claims: usize,
    /// Admission decisions made at once; requests beyond are allowed unchanged with a warning.
    #[arg(long, env = "SCHED_WEBHOOK_MAX_DECISIONS", default_value_t = crate::server::DEFAULT_MAX_DECISIONS,
          value_parser = clap::value_parser!(u32).range(1..=4096).map(|n| n as usize))]
    pub max_decisions: usize,
    /// Memory, estimated from their shape, that the pods under decision may take once decoded (a pod
    /// of many small volumes decodes to a hundred times its JSON); a pod over it alone is not checked,
    /// requests beyond it are allowed unchanged with a warning.
    #[arg(long, env = "SCHED_WEBHOOK_MAX_DECISION_BYTES", default_value_t = crate::server::DEFAULT_MAX_DECISION_BYTES,
          value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    pub max_decision_bytes: usize,
}

/// Parses a lease duration: whole seconds from 2 s to 10 min.
pub fn parse_lease_duration(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if !(Duration::from_secs(2)..=Duration::from_secs(600)).contains(&duration) {
        return Err(format!("lease duration {text:?} out of range: use 2s to 10m"));
    }
    Ok(Duration::from_secs(duration.as_secs()))
}

/// Parses a label selector in kubectl's syntax into its API form.
pub fn parse_label_selector(text: &str) -> Result<LabelSelector, String> {
    let mut requirements = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        // A requirement ends at the first comma outside parentheses.
        let mut depth = 0usize;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        requirements.push(parse_requirement(rest[..end].trim(), text)?);
        rest = rest[end..].trim_start_matches(',').trim();
    }
    let selector = LabelSelector {
        match_expressions: Some(requirements),
        match_labels: None,
    };
    sched_core::labels::Selector::from_label_selector(Some(&selector))
        .map_err(|e| format!("invalid selector {text:?}: {e}"))?;
    Ok(selector)
}

fn parse_requirement(part: &str, whole: &str) -> Result<LabelSelectorRequirement, String> {
    let invalid = || {
        format!(
            "invalid selector {whole:?} at {part:?}: use key=value, key!=value, key in (a,b), key notin (a,b), key or !key"
        )
    };
    let requirement = |key: &str, operator: &str, values: Vec<String>| {
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(invalid());
        }
        Ok(LabelSelectorRequirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values: (!values.is_empty()).then_some(values),
        })
    };
    let set = |list: &str| -> Result<Vec<String>, String> {
        let inner = list
            .trim()
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(invalid)?;
        Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
    };
    if let Some((key, value)) = part.split_once("!=") {
        return requirement(key, "NotIn", vec![value.trim().to_string()]);
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return requirement(key, "In", vec![value.trim().to_string()]);
    }
    if let Some((key, list)) = part.split_once(" notin ") {
        return requirement(key, "NotIn", set(list)?);
    }
    if let Some((key, list)) = part.split_once(" in ") {
        return requirement(key, "In", set(list)?);
    }
    if let Some(key) = part.strip_prefix('!') {
        return requirement(key, "DoesNotExist", Vec::new());
    }
    requirement(part, "Exists", Vec::new())
}

/// `certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    /// DNS name of the serving certificate (repeatable), e.g. sched-webhook.kube-system.svc.
    #[arg(long = "dns-name")]
    pub dns_names: Vec<String>,
    /// IP address of the serving certificate (repeatable), e.g. 127.0.0.1 for local runs.
    #[arg(long = "ip")]
    pub ips: Vec<IpAddr>,
    /// Directory for ca.crt, ca.key, tls.crt, tls.key.
    #[arg(long)]
    pub out: PathBuf,
    /// Validity in days.
    #[arg(long, default_value_t = 365)]
    pub days: i64,
    /// Also write a client CA and a client certificate with this common name (client-ca.crt,
    /// client-ca.key, client.crt, client.key): the API server presents the pair, the webhook trusts
    /// the CA with `serve --client-ca-file`.
    #[arg(long, value_name = "COMMON_NAME")]
    pub client_cert: Option<String>,
    /// Also create or update this MutatingWebhookConfiguration with the CA as caBundle.
    #[arg(long)]
    pub webhook_config: Option<String>,
    /// The webhook's URL (e.g. https://127.0.0.1:8443/mutate).
    #[arg(long, conflicts_with = "service", requires = "webhook_config")]
    pub url: Option<String>,
    /// The webhook's Service, NAMESPACE/NAME[:PORT] (path /mutate).
    #[arg(long, requires = "webhook_config")]
    pub service: Option<String>,
    /// Kubeconfig (default: $KUBECONFIG, which may list several files, then ~/.kube/config, then the
    /// in-cluster ServiceAccount).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// `--cert-reload-interval`: how often, or never.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadInterval {
    /// Check the files this often.
    Every(Duration),
    /// Never reload (`never`).
    Never,
}

/// Parses `never` or an interval above zero and at most an hour. Zero is refused rather than taken
/// to mean "never": a typo must not silently stop certificate rotation.
pub fn parse_reload_interval(text: &str) -> Result<ReloadInterval, String> {
    if text.trim().eq_ignore_ascii_case("never") {
        return Ok(ReloadInterval::Never);
    }
    let duration = parse_duration(text)?;
    if duration.is_zero() {
        return Err(format!(
            "reload interval {text:?} must be more than 0 (use `never` to turn reloading off)"
        ));
    }
    if duration > MAX_DURATION {
        return Err(format!(
            "reload interval {text:?} is longer than the maximum, 1h (use `never` to turn reloading off)"
        ));
    }
    Ok(ReloadInterval::Every(duration))
}

/// Parses a shutdown grace period: 0 (drop what is in flight) to an hour.
pub fn parse_grace(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration > MAX_DURATION {
        return Err(format!(
            "shutdown grace {text:?} is longer than the maximum, 1h (the kubelet kills the pod after terminationGracePeriodSeconds anyway)"
        ));
    }
    Ok(duration)
}

/// Parses a timeout: a duration ([`parse_duration`]) above zero and at most an hour.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration.is_zero() {
        return Err(format!("timeout {text:?} must be more than 0"));
    }
    if duration > MAX_DURATION {
        return Err(format!("timeout {text:?} is longer than the maximum, 1h"));
    }
    Ok(duration)
}

/// The longest duration any flag accepts.
pub const MAX_DURATION: Duration = crate::serving::MAX_TIMEOUT;

/// Parses `250ms`, `10s`, `2m` or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: use e.g. 500ms, 10s, 2m"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => {
            return Err(format!(
                "invalid duration unit {unit:?} in {text:?}: use ms, s or m"
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration {text:?}"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| format!("duration {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("3h").is_err());
        assert!(parse_duration("x").is_err());
    }

    #[test]
    fn label_selectors() {
        let selector = parse_label_selector("a=b, c!=d,e in (f, g),h notin (i),j,!k").expect("parses");
        let got: Vec<(String, String, Vec<String>)> = selector
            .match_expressions
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r.key, r.operator, r.values.unwrap_or_default()))
            .collect();
        let want = [
            ("a", "In", vec!["b"]),
            ("c", "NotIn", vec!["d"]),
            ("e", "In", vec!["f", "g"]),
            ("h", "NotIn", vec!["i"]),
            ("j", "Exists", vec![]),
            ("k", "DoesNotExist", vec![]),
        ];
        assert_eq!(got.len(), want.len());
        for ((key, op, values), (k, o, v)) in got.iter().zip(want) {
            assert_eq!((key.as_str(), op.as_str()), (k, o));
            assert_eq!(values, &v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        }
        assert_eq!(
            parse_label_selector("").expect("empty").match_expressions,
            Some(vec![]),
            "empty selects everything"
        );
        for bad in ["=x", "a in b", "a in (b", "a b", "!"] {
            assert!(parse_label_selector(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lease_durations_are_bounded() {
        assert_eq!(parse_lease_duration("15s"), Ok(Duration::from_secs(15)));
        assert!(parse_lease_duration("1s").is_err());
        assert!(parse_lease_duration("1h").is_err());
    }

    #[test]
    fn durations_never_panic_and_are_bounded() {
        // Beyond what a Duration holds (these used to panic in Duration::from_secs_f64).
        for huge in ["1e30", "100000000000000000000s", "400000000000000000m", "1e400"] {
            let error = parse_duration(huge).expect_err(huge);
            assert!(!error.contains('\n'), "one line: {error}");
        }
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("NaNs").is_err());
        assert!(parse_duration("").is_err());
        assert!(
            parse_duration("1e12s").is_err(),
            "exponents are not a duration syntax"
        );

        // --shutdown-grace: 0 to 1h.
        assert_eq!(parse_grace("0"), Ok(Duration::ZERO));
        assert_eq!(parse_grace("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_grace("60m"), Ok(Duration::from_secs(3600)));
        for bad in ["1000000000000s", "61m", "100000000000000000000s"] {
            let error = parse_grace(bad).expect_err(bad);
            assert!(
                error.contains("shutdown grace") || error.contains("too large"),
                "{error}"
            );
        }

        // --cert-reload-interval: `never`, or above 0 and at most 1h.
        assert_eq!(parse_reload_interval("never"), Ok(ReloadInterval::Never));
        assert_eq!(parse_reload_interval("Never"), Ok(ReloadInterval::Never));
        assert_eq!(
            parse_reload_interval("500ms"),
            Ok(ReloadInterval::Every(Duration::from_millis(500)))
        );
        for zero in ["0", "0s", "0ms"] {
            let error = parse_reload_interval(zero).expect_err(zero);
            assert!(
                error.contains("never"),
                "the error names the way to turn it off: {error}"
            );
        }
        assert!(parse_reload_interval("2h").is_err());
        assert!(parse_reload_interval("2m").is_ok());

        // Timeouts: above 0, at most 1h.
        assert_eq!(parse_timeout("5s"), Ok(Duration::from_secs(5)));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("61m").is_err());
    }

    #[test]
    fn serve_flags_are_validated_by_the_command_line() {
        let serve = |extra: &[&str]| {
            let mut argv = vec!["sched-webhook", "serve", "--tls-cert", "c", "--tls-key", "k"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|cli| match cli.command {
                Command::Serve(args) => args,
                Command::Certs(_) | Command::Explainer(_) => panic!("serve expected"),
            })
        };
        let args = serve(&[]).expect("defaults");
        assert_eq!(
            args.cert_reload_interval,
            ReloadInterval::Every(Duration::from_secs(10))
        );
        assert_eq!(args.shutdown_grace, Duration::from_secs(20));
        assert_eq!(args.max_connections, crate::serving::DEFAULT_MAX_CONNECTIONS);
        assert_eq!(
            args.header_read_timeout + args.body_read_timeout,
            Duration::from_secs(10)
        );
        assert_eq!(args.client_ca_file, None);
        assert_eq!(
            args.watch_failure_threshold,
            crate::health::DEFAULT_WATCH_FAILURE_THRESHOLD
        );
        assert_eq!(args.heartbeat_timeout, crate::health::DEFAULT_HEARTBEAT_TIMEOUT);
        assert_eq!(args.stall_threshold, crate::watchdog::DEFAULT_STALL_THRESHOLD);
        let args = serve(&["--cert-reload-interval", "never", "--client-ca-file", "ca.crt"]).expect("never");
        assert_eq!(args.cert_reload_interval, ReloadInterval::Never);
        assert_eq!(args.client_ca_file, Some(PathBuf::from("ca.crt")));
        for bad in [
            &["--cert-reload-interval", "0"][..],
            &["--shutdown-grace", "1000000000000s"],
            &["--shutdown-grace", "100000000000000000000s"],
            &["--max-connections", "0"],
            &["--header-read-timeout", "0"],
            &["--idle-timeout", "2h"],
            &["--watch-failure-threshold", "0"],
            &["--heartbeat-timeout", "x"],
        ] {
            let error = serve(bad).expect_err("refused").to_string();
            let first = error.lines().next().unwrap_or_default();
            assert!(first.starts_with("error: invalid value"), "{bad:?}: {error}");
        }
    }

    #[test]
    fn cli_parses() {
        let cli = Cli::try_parse_from([
            "sched-webhook",
            "certs",
            "--ip",
            "127.0.0.1",
            "--out",
            "/tmp/x",
            "--webhook-config",
            "w",
            "--url",
            "https://127.0.0.1:8443/mutate",
        ])
        .expect("parses");
        let Command::Certs(args) = cli.command else {
            panic!("certs expected");
        };
        assert_eq!(args.ips.len(), 1);
        assert!(Cli::try_parse_from(["sched-webhook", "certs", "--out", "d", "--url", "u"]).is_err());
        let cli = Cli::try_parse_from(["sched-webhook", "serve", "--tls-cert", "c", "--tls-key", "k"])
            .expect("serve");
        let Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        assert_eq!(args.admin_listen.ip().to_string(), "127.0.0.1");
    }
}
