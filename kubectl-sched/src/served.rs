//! Commands run on a cluster handed in instead of listed: the in-cluster explainer
//! (`sched-webhook explainer`) keeps the objects current from watches and answers `explain` through
//! the aggregated API with what this module returns. The command line is the CLI's own
//! ([`explain_argv`] writes it from the request, [`crate::cli::Cli`] parses it) and so are the command
//! ([`crate::commands::explain::run_loaded`]) and the renderer, so the served text is what
//! `kubectl sched explain` prints from a listing of the same objects, byte for byte.

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::commands::explain::{ExplainError, run_loaded};
use crate::output::printer::PrinterError;
use crate::source::explainer::{ExplainRequest, ServedAnswer, output_flag};
use crate::source::load::{Cluster, FromServer, LoadError, Loaded};
use sched_core::ClusterObjects;

/// Why a served command did not answer.
#[derive(Debug, thiserror::Error)]
pub enum ServedError {
    /// The request's parameters do not make a command line the CLI accepts.
    #[error("{0}")]
    Usage(String),
    /// The release could not be chosen from the API server's version.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// The command refused (the pod or node is not in the snapshot, ...).
    #[error(transparent)]
    Explain(Box<ExplainError>),
    /// The result could not be rendered as asked.
    #[error(transparent)]
    Render(#[from] PrinterError),
}

impl ServedError {
    /// True when the error means "not found" (HTTP 404) rather than a bad request.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            ServedError::Explain(e) if matches!(
                **e,
                ExplainError::NotFound { .. }
                    | ExplainError::NodeNotFound { .. }
                    | ExplainError::Resolve(crate::source::pods::ResolveError::PodNotFound { .. })
            )
        )
    }
}

/// The CLI's command line for `request` (after the program name). Every value is attached to its
/// flag (`--namespace=…`) and the pod comes after `--`, so that no value a user sends can be read as
/// a flag of its own (`--from=/etc/…` as a pod name is a pod name).
pub fn explain_argv(request: &ExplainRequest) -> Vec<String> {
    let mut argv = vec![
        "explain".to_string(),
        format!("--namespace={}", request.namespace),
    ];
    let options = [
        ("--output", request.output.as_ref()),
        ("--node", request.node.as_ref()),
        ("--profile", request.profile.as_ref()),
    ];
    for (flag, value) in options {
        if let Some(value) = value {
            argv.push(format!("{flag}={value}"));
        }
    }
    if request.exit_code {
        argv.push("--exit-code".to_string());
    }
    argv.push("--".to_string());
    argv.push(request.pod.clone());
    argv
}

/// The longest name Kubernetes accepts (a DNS subdomain).
const MAX_NAME: usize = 253;

/// Refuses a namespace or pod name Kubernetes would not accept (lowercase letters, digits, `-`
/// and `.`), before it reaches a command line.
fn check_name(what: &str, name: &str) -> Result<(), ServedError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if valid {
        Ok(())
    } else {
        Err(ServedError::Usage(format!("invalid {what} name {name:?}")))
    }
}

/// Runs `explain` as `request` asks on `objects` (the server's snapshot), with `from` saying where
/// they came from. `kubeconfig` (None: in-cluster) connects for the live facts a listing reads too
/// (kube-scheduler's Lease, the pod's FailedScheduling events). Blocks (it runs a runtime of its
/// own for those reads): call it off the async runtime.
pub fn explain(
    request: &ExplainRequest,
    objects: ClusterObjects,
    from: FromServer,
    kubeconfig: Option<&std::path::Path>,
) -> Result<ServedAnswer, ServedError> {
    check_name("namespace", &request.namespace)?;
    check_name("pod", &request.pod)?;
    let mut argv = vec!["kubectl-sched".to_string()];
    if let Some(path) = kubeconfig {
        argv.push("--kubeconfig".to_string());
        argv.push(path.display().to_string());
    }
    argv.extend(explain_argv(request));
    let cli = Cli::try_parse_from(&argv).map_err(|e| ServedError::Usage(usage_line(&e)))?;
    let Command::Explain(args) = &cli.command else {
        return Err(ServedError::Usage("not an explain command line".to_string()));
    };
    // A file named in `-o jsonpath-file=` would be read on the server.
    if output_flag(&args.output).is_none() {
        return Err(ServedError::Usage(
            "-o jsonpath-file is read where the CLI runs; send the template (-o jsonpath=…)".to_string(),
        ));
    }
    let loaded =
        Loaded::from_server(objects, from, &args.release).map_err(|e| ServedError::Load(Box::new(e)))?;
    // The live facts are read as the listing reads them; without a connection the answer would lack
    // them, so a connection that cannot be made is the request's error.
    let cluster = Cluster::connect(&cli.global).map_err(|e| ServedError::Load(Box::new(e)))?;
    let out = run_loaded(&cli.global, args, loaded, Some(cluster))
        .map_err(|e| ServedError::Explain(Box::new(e)))?;
    let rendered = crate::output::printer::render(
        &args.output,
        |format| crate::output::explain::render(&out.result, format),
        crate::output::printer::EXPLAIN_PODS,
    )?;
    Ok(ServedAnswer {
        stdout: String::from_utf8_lossy(&rendered.stdout).into_owned(),
        nothing_found: rendered.nothing_found,
        warnings: out.warnings,
        notes: out.notes,
        exit_code: out.result.exit_code(args.exit_code),
    })
}

/// clap's message in one line, without its `error: ` prefix and its usage block.
fn usage_line(err: &clap::Error) -> String {
    let text = err.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(request: &ExplainRequest) -> Result<crate::cli::ExplainArgs, String> {
        let mut argv = vec!["kubectl-sched".to_string()];
        argv.extend(explain_argv(request));
        let cli = Cli::try_parse_from(argv).map_err(|e| usage_line(&e))?;
        match cli.command {
            Command::Explain(args) => Ok(args),
            _ => Err("not explain".to_string()),
        }
    }

    /// Whatever a user sends, it stays the value it was sent as: nothing becomes `--from`, `-f` or
    /// `--config` (files on the server).
    #[test]
    fn values_never_become_flags() {
        let cases = [
            ("a pod named like a flag", "--from=/etc/passwd", None, None),
            ("a node named like a flag", "p", Some("--from=/etc/passwd"), None),
            (
                "an output that smuggles a flag",
                "p",
                None,
                Some("json --config=/etc/x"),
            ),
        ];
        for (name, pod, node, output) in cases {
            let request = ExplainRequest {
                namespace: "ns".into(),
                pod: pod.into(),
                node: node.map(str::to_string),
                output: output.map(str::to_string),
                ..ExplainRequest::default()
            };
            match parsed(&request) {
                Ok(args) => {
                    assert_eq!(args.pod.as_deref(), Some(pod), "{name}");
                    assert_eq!(args.node.as_deref(), node, "{name}");
                    assert!(
                        args.from.is_none() && args.filename.is_none() && args.config.is_none(),
                        "{name}"
                    );
                }
                // Refused as a bad value is as good: nothing was read.
                Err(message) => assert!(!message.is_empty(), "{name}"),
            }
        }
    }

    #[test]
    fn names_kubernetes_would_refuse_are_refused() {
        let cases = [
            ("a pod", "web-0", true),
            ("dots", "a.b", true),
            ("a flag", "--from=x", false),
            ("a slash", "a/b", false),
            ("upper case", "Web", false),
            ("empty", "", false),
        ];
        for (name, value, ok) in cases {
            assert_eq!(check_name("pod", value).is_ok(), ok, "{name}");
        }
    }
}
