//! Command line (clap derive). Every flag of `serve` also reads an environment variable
//! (`SCHED_WEBHOOK_*`), as Deployments usually set them.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

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
    /// server's AdmissionConfiguration to present one (see the README). Reloaded with the pair.
    #[arg(long, env = "SCHED_WEBHOOK_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// How often the certificate files are checked for changes (e.g. 10s, 500ms).
    #[arg(long, env = "SCHED_WEBHOOK_CERT_RELOAD_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub cert_reload_interval: Duration,
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "SCHED_WEBHOOK_MAX_BODY_BYTES", default_value_t = crate::server::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// How long in-flight requests may take to finish after SIGTERM.
    #[arg(long, env = "SCHED_WEBHOOK_SHUTDOWN_GRACE", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// KubeSchedulerConfiguration the engine evaluates opted-in pods and nominations with (default:
    /// kube-scheduler's defaults).
    #[arg(long, env = "SCHED_WEBHOOK_SCHEDULER_CONFIG")]
    pub scheduler_config: Option<PathBuf>,
    /// Kubeconfig (default: $KUBECONFIG, which may list several files, then ~/.kube/config, then the
    /// in-cluster ServiceAccount).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
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
    Ok(Duration::from_secs_f64(secs))
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
