//! What a run prints where, the same for every command: the result on stdout (a reader that went
//! away is not an error), warnings always and notes and timings by `-v` on stderr, each on one line,
//! and errors and panics as one `error: ...` line.

use std::io::{BufRead, Write};
use std::time::Instant;

use anyhow::Context;

use crate::commands::Messages;
use crate::output::Rendered;

/// Prints for one run, at the `-v` it was given.
#[derive(Debug, Clone, Copy)]
pub struct Console {
    verbosity: u8,
}

impl Console {
    /// A console for `-v verbosity`.
    pub fn new(verbosity: u8) -> Self {
        Console { verbosity }
    }

    /// The glue of every command that prints a report: runs it, says its warnings and notes, renders
    /// its result, says how long it took (`-v 2`) and writes the result to stdout. Returns the command's
    /// output for its exit code. The renderer may take what it writes out of the output, rather than
    /// copy it (`snapshot`'s document).
    pub fn report<O, E, R>(
        &self,
        command: &str,
        run: impl FnOnce() -> Result<O, E>,
        render: impl FnOnce(&mut O) -> Result<Rendered, R>,
    ) -> anyhow::Result<O>
    where
        O: Messages,
        anyhow::Error: From<E> + From<R>,
    {
        let started = Instant::now();
        let mut out = run()?;
        self.messages(&out);
        let rendering = Instant::now();
        let rendered = render(&mut out)?;
        if let Some(line) = &rendered.nothing_found {
            eprintln!("{line}");
        }
        self.took("rendered in", rendering);
        self.took(&format!("{command} took"), started);
        self.emit(&rendered.stdout)?;
        Ok(out)
    }

    /// A command's warnings (always) and notes (`-v 1`), then its phases' timings (`-v 2`).
    pub fn messages(&self, out: &impl Messages) {
        for w in out.warnings() {
            self.warning(w);
        }
        if self.verbosity >= 1 {
            for n in out.notes() {
                eprintln!("{}", flatten_whitespace(n));
            }
        }
        if self.verbosity >= 2 {
            for t in out.timings() {
                eprintln!("{t}");
            }
        }
    }

    /// One warning line.
    pub fn warning(&self, text: &str) {
        eprintln!("warning: {}", flatten_whitespace(text));
    }

    /// One line shown with `-v 1`.
    pub fn note(&self, text: &str) {
        if self.verbosity >= 1 {
            eprintln!("{}", flatten_whitespace(text));
        }
    }

    /// `-v 2`: `WHAT N ms` since `since`.
    fn took(&self, what: &str, since: Instant) {
        if self.verbosity >= 2 {
            eprintln!("{what} {:.0} ms", since.elapsed().as_secs_f64() * 1000.0);
        }
    }

    /// Writes to stdout; a reader that went away (`| head`) is not an error.
    pub fn emit(&self, bytes: &[u8]) -> anyhow::Result<()> {
        emit(bytes)
    }

    /// Asks on stderr, reads one line from stdin: only "y" or "yes" confirm.
    pub fn confirm(&self, question: &str) -> anyhow::Result<bool> {
        eprint!("{question} [y/N]: ");
        std::io::stderr().flush().context("writing to stderr")?;
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .context("reading the confirmation from stdin")?;
        Ok(matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
    }
}

fn emit(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// A panic is a bug, but the user still gets one line and exit code 1, never a backtrace.
pub fn install_panic_hook() {
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
pub fn one_line(err: &anyhow::Error) -> String {
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
        let listing = crate::source::load::LoadError::Api {
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
