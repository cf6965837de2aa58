//! `kubectl sched`: kube-scheduler's decisions, explained.
//!
//! `main` parses the command line, runs a command, prints what the renderers made of its result, and
//! turns errors into one line on stderr with exit code 1 (usage errors exit 2, from clap).

mod cli;
mod commands;
mod diagnosis;
mod output;
mod source;

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{CommandFactory, Parser};

use cli::{Cli, Command, ExplainFormat, PreemptArgs, PreemptFormat, SimulateArgs, TriageArgs};
use commands::explain::ExplainResult;
use commands::preempt::{DryRunView, Next, PreemptError, PreemptReport};
use output::preempt as preempt_output;

// jemalloc rather than glibc's malloc: loading a large snapshot allocates millions of small strings
// from two threads at once, where glibc's arenas cost measurably more CPU (docs/performance.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    install_panic_hook();
    // The completion protocol's words are the user's, flags included: clap must not take the global
    // ones (`__complete --kubeconfig F explain ""`) for this process's own.
    let raw: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(("__complete", words)) = raw.split_first().map(|(first, rest)| (first.as_str(), rest)) {
        let (candidates, directive) =
            commands::complete::complete(&Cli::command(), words, &commands::complete::Live);
        return match emit(commands::complete::render(&candidates, directive).as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let cli = Cli::try_parse().unwrap_or_else(|e| e.exit());
    match run(&cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {}", one_line(&err));
            let code = err
                .downcast_ref::<PreemptError>()
                .map_or(1, PreemptError::exit_code);
            ExitCode::from(code)
        }
    }
}

/// A panic is a bug, but the user still gets one line and exit code 1, never a backtrace.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "error: internal error{location}: {}; please report it",
            flatten_whitespace(&payload)
        );
        std::process::exit(1);
    }));
}

fn flatten_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The error and the causes its message does not already include, on one line. An error from the API
/// server reads as kubectl's (`Error from server (Forbidden): ...`), never as kube's dump of the Status.
fn one_line(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        // A client error's own rendering already says all its causes (the Status) say.
        let client_error = cause.downcast_ref::<kube::Error>();
        let text = flatten_whitespace(&match client_error {
            Some(e) => sched_core::api_error::describe(e),
            None => cause.to_string(),
        });
        if !text.is_empty() && !message.contains(&text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&text);
        }
        if client_error.is_some() {
            break;
        }
    }
    message
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
fn emit(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

fn report_messages(verbosity: u8, warnings: &[String], notes: &[String]) {
    for w in warnings {
        eprintln!("warning: {}", flatten_whitespace(w));
    }
    if verbosity >= 1 {
        for n in notes {
            eprintln!("{}", flatten_whitespace(n));
        }
    }
}

/// `preempt`'s report in the requested format.
fn render_preempt(report: &PreemptReport, format: PreemptFormat) -> anyhow::Result<String> {
    Ok(preempt_output::render(report, format)?)
}

/// What a renderer made of a result: a line instead of an empty table goes to stderr.
fn rendered_text(rendered: output::Rendered) -> Vec<u8> {
    if let Some(line) = &rendered.nothing_found {
        eprintln!("{line}");
    }
    rendered.stdout
}

/// Asks on stderr, reads one line from stdin: only "y" or "yes" confirm.
fn confirm(question: &str) -> anyhow::Result<bool> {
    eprint!("{question} [y/N]: ");
    std::io::stderr().flush().context("writing to stderr")?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("reading the confirmation from stdin")?;
    Ok(matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}

/// Test hook, in debug builds only (the e2e tests run those): with
/// `KUBECTL_SCHED_TEST_PAUSE_BEFORE_WRITES` set, a confirmed preemption stops after the cluster was read
/// again and before the first write, until a line is read from stdin, so that a test can change the
/// cluster in between (the window a write's preconditions guard).
#[cfg(debug_assertions)]
fn test_hook_pause_before_writes() -> anyhow::Result<()> {
    if std::env::var_os("KUBECTL_SCHED_TEST_PAUSE_BEFORE_WRITES").is_none() {
        return Ok(());
    }
    eprint!("[test hook] paused before the first write; press Enter to go on: ");
    std::io::stderr().flush().context("writing to stderr")?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading stdin")?;
    Ok(())
}

fn triage(cli: &Cli, args: &TriageArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let out = commands::triage::run(&cli.global, args)?;
    report_messages(cli.global.verbosity, &out.warnings, &out.notes);
    let r = &out.report;
    let text = rendered_text(output::triage::render(
        r,
        args.output,
        !cli.global.all_namespaces,
    )?);
    if cli.global.verbosity >= 2 {
        eprintln!("triage took {:.0} ms", started.elapsed().as_secs_f64() * 1000.0);
    }
    emit(&text)?;
    Ok(if r.stuck_pods() > 0 { 3 } else { 0 })
}

fn simulate(cli: &Cli, args: &SimulateArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let out = commands::simulate::run(&cli.global, args)?;
    report_messages(cli.global.verbosity, &out.warnings, &out.notes);
    let r = &out.report;
    let text = rendered_text(output::simulate::render(r, args.output)?);
    if cli.global.verbosity >= 2 {
        eprintln!("simulate took {:.0} ms", started.elapsed().as_secs_f64() * 1000.0);
    }
    emit(&text)?;
    Ok(r.exit_code())
}

fn preempt(cli: &Cli, args: &PreemptArgs) -> anyhow::Result<u8> {
    let mut planned = commands::preempt::plan(&cli.global, args, std::io::stdin().is_terminal())?;
    report_messages(cli.global.verbosity, &planned.warnings, &planned.notes);
    match std::mem::replace(&mut planned.next, Next::PrintOnly) {
        Next::PrintOnly => {
            emit(render_preempt(&planned.report, args.output)?.as_bytes())?;
            Ok(planned.report.exit_code())
        }
        next @ (Next::Confirm | Next::Execute) => {
            let table = args.output == PreemptFormat::Table;
            // --dry-run=server has nothing to confirm and nothing to wait for (each write is only
            // validated): its steps are shown once, with their outcomes, after the run; not also as a plan
            // beforehand and as progress lines meanwhile.
            let server_dry_run = planned.report.dry_run == DryRunView::Server;
            if table && !server_dry_run {
                emit(preempt_output::report(&planned.report).as_bytes())?;
            }
            if matches!(next, Next::Confirm) {
                if !confirm(&preempt_output::question(&planned.report))? {
                    // As `kubectl delete --interactive`: declining is an answer, not an error (exit 0).
                    emit(b"preemption is cancelled: nothing was changed\n")?;
                    return Ok(0);
                }
                // Time has passed since the plan was read: it is executed only if the cluster, read
                // again, still yields it.
                if let Err(e) = planned.recheck(args) {
                    if matches!(e, PreemptError::Changed { replanned: true, .. }) {
                        let text = if table {
                            format!(
                                "\nThe cluster changed since the plan was shown. Now:\n\n{}",
                                preempt_output::report(&planned.report)
                            )
                        } else {
                            render_preempt(&planned.report, args.output)?
                        };
                        emit(text.as_bytes())?;
                    }
                    return Err(e.into());
                }
                #[cfg(debug_assertions)]
                test_hook_pause_before_writes()?;
            }
            let outcome = planned.execute(|i, total, result| {
                if !server_dry_run {
                    eprintln!("{}", preempt_output::progress(i, total, result));
                }
            });
            let text = if table && server_dry_run {
                render_preempt(&planned.report, args.output)?
            } else if table {
                preempt_output::results(&planned.report)
            } else {
                render_preempt(&planned.report, args.output)?
            };
            emit(text.as_bytes())?;
            outcome?;
            Ok(0)
        }
    }
}

fn run(cli: &Cli) -> anyhow::Result<u8> {
    let started = Instant::now();
    let verbosity = cli.global.verbosity;
    match &cli.command {
        Command::Explain(args) => {
            let mut out = commands::explain::run(&cli.global, args)?;
            report_messages(verbosity, &out.warnings, &out.notes);
            if verbosity >= 2 {
                for t in &out.timings {
                    eprintln!("{t}");
                }
            }
            let rendering = Instant::now();
            let text = rendered_text(output::explain::render(&out.result, args.output)?);
            if verbosity >= 2 {
                eprintln!("rendered in {:.0} ms", rendering.elapsed().as_secs_f64() * 1000.0);
                eprintln!("explain took {:.0} ms", started.elapsed().as_secs_f64() * 1000.0);
            }
            emit(&text)?;
            if args.watch
                && let ExplainResult::One(report) = &mut out.result
            {
                let json = matches!(args.output, ExplainFormat::Json | ExplainFormat::Yaml);
                let stop = commands::watch::run(
                    &cli.global,
                    args,
                    report,
                    |update| emit(update.line(json).as_bytes()),
                    |warning| eprintln!("warning: {}", flatten_whitespace(warning)),
                )?;
                if stop == commands::watch::Stop::TimedOut && verbosity >= 1 {
                    eprintln!("the watch stopped after --watch-timeout");
                }
            }
            Ok(out.result.exit_code(args.exit_code))
        }
        Command::Preempt(args) => preempt(cli, args),
        Command::Triage(args) => triage(cli, args),
        Command::Simulate(args) => simulate(cli, args),
        Command::Snapshot(args) => {
            let out = commands::snapshot::run(&cli.global, args)?;
            report_messages(verbosity, &out.warnings, &out.notes);
            match out.stdout {
                Some(bytes) => emit(&bytes).map(|()| 0),
                None => Ok(0),
            }
        }
        Command::Completion { shell } => match shell.shell() {
            Some(shell) => {
                let mut buf = Vec::new();
                clap_complete::generate(shell, &mut Cli::command(), "kubectl-sched", &mut buf);
                emit(&buf).map(|()| 0)
            }
            None => emit(commands::complete::KUBECTL_PLUGIN_SCRIPT.as_bytes()).map(|()| 0),
        },
        // Handled in `main` before parsing, with the raw words; kept in the tree for `--help`'s sake.
        // `main` answers `__complete` before parsing, with the raw words; this arm is never reached.
        Command::Complete { words } => {
            let (candidates, directive) =
                commands::complete::complete(&Cli::command(), words, &commands::complete::Live);
            emit(commands::complete::render(&candidates, directive).as_bytes()).map(|()| 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_become_one_line_without_repeating_causes() {
        let inner = std::io::Error::other("connection refused");
        let err = anyhow::Error::new(inner).context("cannot list Node (v1):\n  connection refused");
        assert_eq!(one_line(&err), "cannot list Node (v1): connection refused");
        let err = anyhow::anyhow!("root cause").context("loading");
        assert_eq!(one_line(&err), "loading: root cause");
    }

    /// A 403 while listing reads as kubectl prints it, in one line naming the verb and the resource; not
    /// as kube's `Display`, which appends a Debug dump of the Status.
    #[test]
    fn api_errors_read_as_kubectls() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "nodes is forbidden: User \"system:serviceaccount:x:y\" cannot list resource \"nodes\" \
                        in API group \"\" at the cluster scope",
            "reason": "Forbidden", "details": {"kind": "nodes"}, "code": 403
        }))
        .unwrap();
        let want = "https://127.0.0.1:6443: cannot list Node (v1): Error from server (Forbidden): nodes is \
                    forbidden: User \"system:serviceaccount:x:y\" cannot list resource \"nodes\" in API group \
                    \"\" at the cluster scope";
        let listing = source::load::LoadError::Api {
            server: "https://127.0.0.1:6443".into(),
            source: sched_core::snapshot::kube::ApiLoadError::List {
                kind: "Node",
                api_version: "v1",
                source: kube::Error::Api(Box::new(status.clone())),
            },
        };
        let cases = [
            ("load error", anyhow::Error::new(listing)),
            (
                "bare client error under a context",
                anyhow::Error::new(kube::Error::Api(Box::new(status)))
                    .context("https://127.0.0.1:6443: cannot list Node (v1)"),
            ),
        ];
        for (name, err) in cases {
            assert_eq!(one_line(&err), want, "{name}");
        }
    }
}
