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
use crate::source::explainer::{ExplainRequest, ServedAnswer};
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

/// The CLI's command line for `request` (after the program name).
pub fn explain_argv(request: &ExplainRequest) -> Vec<String> {
    let mut argv = vec![
        "explain".to_string(),
        request.pod.clone(),
        "-n".to_string(),
        request.namespace.clone(),
    ];
    let options = [
        ("-o", request.output.as_ref()),
        ("--node", request.node.as_ref()),
        ("--profile", request.profile.as_ref()),
    ];
    for (flag, value) in options {
        if let Some(value) = value {
            argv.push(flag.to_string());
            argv.push(value.clone());
        }
    }
    if request.exit_code {
        argv.push("--exit-code".to_string());
    }
    argv
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
