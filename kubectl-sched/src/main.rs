//! `kubectl sched`: kube-scheduler's decisions, explained.
//!
//! `main` parses the command line ([`cli`]), runs a command ([`commands`], which take the cluster and
//! the pod from [`source`] and add [`diagnosis`]), prints what [`output`] made of its result through
//! the one [`console`] every command shares, and turns errors into one line on stderr with exit code 1
//! (a refused preemption has its own codes; usage errors exit 2, from clap, as does a release that
//! cannot be evaluated with).

use kubectl_sched::{cli, commands, console, output, source};

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command, ExplainFormat, GlobalArgs, Output, PreemptArgs, PreemptFormat};
use commands::preempt::{DryRunView, Next, PreemptError};
use console::{Console, one_line};

// jemalloc rather than glibc's malloc: loading a large snapshot allocates millions of small strings
// from two threads at once, where glibc's arenas cost measurably more CPU (docs/performance.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    console::install_panic_hook();
    // The completion protocol's words are the user's, flags included: clap must not take the global
    // ones (`__complete --kubeconfig F explain ""`) for this process's own.
    let raw: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let result = match raw.split_first().map(|(first, rest)| (first.as_str(), rest)) {
        Some(("__complete", words)) => complete(Console::new(0), words),
        _ => {
            let cli = Cli::try_parse().unwrap_or_else(|e| e.exit());
            run(&cli, Console::new(cli.global.verbosity))
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            let mut line = one_line(&err);
            // A missing permission is not fixed by trying again: say which one, and which role grants it
            // (unless the error already does).
            if let Some(advice) = source::rbac::advice_for(&line).filter(|_| !line.contains("deploy/rbac/")) {
                line.push_str("; ");
                line.push_str(&advice);
            }
            eprintln!("error: {line}");
            let code = exit_code(&err);
            ExitCode::from(code)
        }
    }
}

/// The exit code of a failed run: 2 for usage errors (no release to evaluate with, a refused
/// preemption), else 1 (or preempt's own codes).
fn exit_code(err: &anyhow::Error) -> u8 {
    if err
        .chain()
        .any(|cause| cause.is::<source::release::ReleaseError>())
    {
        return 2;
    }
    err.downcast_ref::<PreemptError>()
        .map_or(1, PreemptError::exit_code)
}

/// Runs the command and returns its exit code: each command's run, renderer and exit code, the rest
/// ([`Console::report`]) written once.
fn run(cli: &Cli, console: Console) -> anyhow::Result<u8> {
    let global = &cli.global;
    match &cli.command {
        Command::Explain(args) => {
            match commands::explain::via::route(global, args)? {
                commands::explain::via::Route::Served(out) => {
                    console.messages(&*out);
                    let answer = &out.explanation.answer;
                    if let Some(line) = &answer.nothing_found {
                        eprintln!("{line}");
                    }
                    console.emit(answer.stdout.as_bytes())?;
                    return Ok(answer.exit_code);
                }
                commands::explain::via::Route::Local(notes) => notes.iter().for_each(|n| console.note(n)),
            }
            let mut out = console.report(
                "explain",
                || commands::explain::run(global, args),
                |out| {
                    output::printer::render(
                        &args.output,
                        |format| output::explain::render(&out.result, format),
                        output::printer::EXPLAIN_PODS,
                    )
                },
            )?;
            if args.watch
                && let commands::explain::ExplainResult::One(report) = &mut out.result
            {
                let json = matches!(args.output.format(), ExplainFormat::Json | ExplainFormat::Yaml);
                let stop = commands::watch::run(
                    global,
                    args,
                    report,
                    |update| console.emit(update.line(json).as_bytes()),
                    |warning| console.warning(warning),
                )?;
                if stop == commands::watch::Stop::TimedOut {
                    console.note("the watch stopped after --watch-timeout");
                }
            }
            Ok(out.result.exit_code(args.exit_code))
        }
        Command::Preempt(args) => preempt(console, global, args),
        Command::Triage(args) => {
            let out = console.report(
                "triage",
                || commands::triage::run(global, args),
                |out| {
                    output::printer::render(
                        &args.output,
                        |format| output::triage::render(&out.report, format, !global.all_namespaces),
                        output::printer::TRIAGE_PODS,
                    )
                },
            )?;
            Ok(if out.report.stuck_pods() > 0 { 3 } else { 0 })
        }
        Command::Simulate(args) => {
            let out = console.report(
                "simulate",
                || commands::simulate::run(global, args),
                |out| {
                    output::printer::render(
                        &args.output,
                        |format| output::simulate::render(&out.report, format),
                        output::printer::SIMULATE_PODS,
                    )
                },
            )?;
            Ok(out.report.exit_code())
        }
        Command::Snapshot(args) => {
            console.report(
                "snapshot",
                || commands::snapshot::run(global, args),
                |out| {
                    Ok::<_, std::convert::Infallible>(output::Rendered {
                        stdout: out.stdout.take().unwrap_or_default(),
                        nothing_found: None,
                    })
                },
            )?;
            Ok(0)
        }
        Command::Completion { shell } => match shell.shell() {
            Some(shell) => {
                let mut buf = Vec::new();
                clap_complete::generate(shell, &mut Cli::command(), "kubectl-sched", &mut buf);
                console.emit(&buf).map(|()| 0)
            }
            None => console
                .emit(commands::complete::KUBECTL_PLUGIN_SCRIPT.as_bytes())
                .map(|()| 0),
        },
        // `main` answers `__complete` before parsing, with the raw words; the subcommand is declared for
        // `--help`'s sake and this arm is not reached.
        Command::Complete { words } => complete(console, words),
    }
}

/// kubectl's plugin completion protocol: the candidates for the last of `words`, and cobra's directive.
fn complete(console: Console, words: &[String]) -> anyhow::Result<u8> {
    let (candidates, directive) =
        commands::complete::complete(&Cli::command(), words, &commands::complete::Live);
    console
        .emit(commands::complete::render(&candidates, directive).as_bytes())
        .map(|()| 0)
}

/// `preempt`: the drill printed; when it is to be executed, the plan first, the confirmation on a
/// terminal, the cluster read again, then each step as it completes and what was done.
fn preempt(console: Console, global: &GlobalArgs, args: &PreemptArgs) -> anyhow::Result<u8> {
    if let Some(group) = commands::preempt::pod_group::named_group(args) {
        return preempt_group(console, global, args, group);
    }
    let mut planned = match commands::preempt::plan(global, args, std::io::stdin().is_terminal()) {
        // A gang pod: kube-scheduler preempts for its whole group.
        Err(PreemptError::GangPod { group, .. }) => return preempt_group(console, global, args, &group),
        other => other?,
    };
    console.messages(&planned);
    match std::mem::replace(&mut planned.next, Next::PrintOnly) {
        Next::PrintOnly => {
            console.emit(&preempt_output(&planned.report, args)?)?;
            Ok(planned.report.exit_code())
        }
        next @ (Next::Confirm | Next::Execute) => {
            let table = args.output == Output::Format(PreemptFormat::Table);
            // --dry-run=server has nothing to confirm and nothing to wait for (each write is only
            // validated): its steps are shown once, with their outcomes, after the run; not also as a plan
            // beforehand and as progress lines meanwhile.
            let server_dry_run = planned.report.dry_run == DryRunView::Server;
            if table && !server_dry_run {
                // The plan is shown when it is to be confirmed; with --yes its steps are printed once,
                // as they run.
                let text = if matches!(next, Next::Confirm) {
                    output::preempt::report(&planned.report)
                } else {
                    output::preempt::drill(&planned.report)
                };
                console.emit(text.as_bytes())?;
            }
            if matches!(next, Next::Confirm) {
                if !console.confirm(&output::preempt::question(&planned.report))? {
                    // As `kubectl delete --interactive`: declining is an answer, not an error (exit 0).
                    console.emit(b"preemption is cancelled: nothing was changed\n")?;
                    return Ok(0);
                }
                // Time has passed since the plan was read: it is executed only if the cluster, read
                // again, still yields it.
                if let Err(e) = planned.recheck(args) {
                    if matches!(e, PreemptError::Changed { replanned: true, .. }) {
                        let text = if table {
                            format!(
                                "\nThe cluster changed since the plan was shown. Now:\n\n{}",
                                output::preempt::report(&planned.report)
                            )
                            .into_bytes()
                        } else {
                            preempt_output(&planned.report, args)?
                        };
                        console.emit(&text)?;
                    }
                    return Err(e.into());
                }
                #[cfg(debug_assertions)]
                test_hook_pause_before_writes()?;
            }
            // Each step is printed once: as it completes (on stdout under the results' heading with the
            // table, then only the summary; on stderr beside JSON or YAML, whose document has the
            // results), or, for --dry-run=server, in the results' table after the run.
            let streamed = table && !server_dry_run;
            if streamed {
                console.emit(output::preempt::PROGRESS_HEADING.as_bytes())?;
            }
            let mut write_error = None;
            let outcome = planned.execute(|i, total, result| {
                let line = output::preempt::progress(i, total, result);
                if streamed {
                    if let Err(e) = console.emit(format!("{line}\n").as_bytes()) {
                        write_error.get_or_insert(e);
                    }
                } else if !server_dry_run {
                    eprintln!("{line}");
                }
            });
            let text = if streamed {
                output::preempt::summary(&planned.report).into_bytes()
            } else {
                preempt_output(&planned.report, args)?
            };
            console.emit(&text)?;
            outcome?;
            write_error.map_or(Ok(0), Err)
        }
    }
}

/// `preempt podgroup/NAME` (or a gang pod): the group's drill printed; when it is to be executed,
/// the plan, the confirmation on a terminal, the cluster read again, then each step as it
/// completes.
fn preempt_group(
    console: Console,
    global: &GlobalArgs,
    args: &PreemptArgs,
    group: &str,
) -> anyhow::Result<u8> {
    use output::preempt::pod_group as out;
    let mut planned =
        commands::preempt::pod_group::plan_group(global, args, group, std::io::stdin().is_terminal())?;
    console.messages(&planned);
    let render = |report: &commands::preempt::pod_group::GroupPreemptReport| {
        output::printer::render(
            &args.output,
            |format| out::render(report, format).map(output::Rendered::from),
            output::printer::PREEMPT_GROUP_PODS,
        )
        .map(|rendered| rendered.stdout)
    };
    match std::mem::replace(&mut planned.next, Next::PrintOnly) {
        Next::PrintOnly => {
            console.emit(&render(&planned.report)?)?;
            Ok(planned.report.exit_code())
        }
        next @ (Next::Confirm | Next::Execute) => {
            let table = args.output == Output::Format(PreemptFormat::Table);
            if table && planned.report.dry_run != DryRunView::Server {
                console.emit(out::report(&planned.report).as_bytes())?;
            }
            if matches!(next, Next::Confirm) {
                if !console.confirm(&out::question(&planned.report))? {
                    console.emit(b"preemption is cancelled: nothing was changed\n")?;
                    return Ok(0);
                }
                if let Err(e) = planned.recheck(args) {
                    if matches!(e, PreemptError::Changed { replanned: true, .. }) {
                        console.emit(&render(&planned.report)?)?;
                    }
                    return Err(e.into());
                }
            }
            let mut write_error = None;
            let outcome = planned.execute(|i, total, result| {
                let line = output::preempt::progress(i, total, result);
                if table {
                    if let Err(e) = console.emit(format!("{line}\n").as_bytes()) {
                        write_error.get_or_insert(e);
                    }
                } else {
                    eprintln!("{line}");
                }
            });
            let text = if table {
                out::summary(&planned.report).into_bytes()
            } else {
                render(&planned.report)?
            };
            console.emit(&text)?;
            outcome?;
            write_error.map_or(Ok(0), Err)
        }
    }
}

/// `preempt`'s report as `-o` asks: its own formats, or kubectl's printers over its JSON.
fn preempt_output(
    report: &commands::preempt::PreemptReport,
    args: &PreemptArgs,
) -> Result<Vec<u8>, output::printer::PrinterError> {
    output::printer::render(
        &args.output,
        |format| output::preempt::render(report, format).map(output::Rendered::from),
        output::printer::PREEMPT_PODS,
    )
    .map(|rendered| rendered.stdout)
}

/// Test hook, in debug builds only (the e2e tests run those): with
/// `KUBECTL_SCHED_TEST_PAUSE_BEFORE_WRITES` set, a confirmed preemption stops after the cluster was read
/// again and before the first write, until a line is read from stdin, so that a test can change the
/// cluster in between (the window a write's preconditions guard).
#[cfg(debug_assertions)]
fn test_hook_pause_before_writes() -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::{BufRead as _, Write as _};
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
