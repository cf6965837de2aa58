//! Completion for `kubectl sched ...` through kubectl's plugin completion (kubectl ≥ 1.26): kubectl runs
//! an executable named `kubectl_complete-sched` with the words typed after `kubectl sched` (the last one
//! being the word under the cursor) and reads cobra's `__complete` protocol back: one candidate per line
//! (`value<TAB>description`), then `:<directive>`. The candidates come from the clap command tree, so
//! they never drift from the real flags.

use clap::{Arg, ArgAction, Command, ValueHint};

/// cobra's ShellCompDirectiveDefault: the shell may fall back to file names.
const DIRECTIVE_DEFAULT: u32 = 0;
/// cobra's ShellCompDirectiveNoFileComp: no file-name fallback.
const DIRECTIVE_NO_FILE_COMP: u32 = 4;

/// The script to install as `kubectl_complete-sched` on PATH.
pub const KUBECTL_PLUGIN_SCRIPT: &str = "#!/bin/sh\n\
# kubectl (1.26 or newer) runs this to complete `kubectl sched ...`: install it on your PATH as\n\
# kubectl_complete-sched (chmod +x), next to kubectl-sched.\n\
exec kubectl-sched __complete \"$@\"\n";

/// The candidates and cobra's directive for `words` (the last word is the one being completed; an empty
/// last word means the cursor is after a space).
pub fn complete(root: &Command, words: &[String]) -> (Vec<String>, u32) {
    let (current, before) = match words.split_last() {
        Some((current, before)) => (current.as_str(), before),
        None => ("", &[][..]),
    };
    let mut command = root.clone();
    command.build();
    let mut path: Vec<Command> = vec![command];
    let mut pending_value: Option<Arg> = None;
    for word in before {
        let here = path.last().expect("root");
        if pending_value.take().is_some() {
            continue;
        }
        if word == "--" {
            break;
        }
        if let Some(name) = word.strip_prefix("--") {
            if !name.contains('=')
                && let Some(arg) = find_long(&path, name)
                && takes_value(arg)
            {
                pending_value = Some(arg.clone());
            }
            continue;
        }
        if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            // -n NS, or -nNS: only a last short flag without an attached value waits for one.
            if let Some(c) = shorts.chars().next()
                && shorts.chars().count() == 1
                && let Some(arg) = find_short(&path, c)
                && takes_value(arg)
            {
                pending_value = Some(arg.clone());
            }
            continue;
        }
        if let Some(sub) = here.find_subcommand(word) {
            let sub = sub.clone();
            path.push(sub);
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
    let here = path.last().expect("root");
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
    // A positional: the shell (for `completion`) has fixed values; a pod name needs the cluster, which
    // completion does not read.
    match here
        .get_positionals()
        .find(|a| !a.get_possible_values().is_empty())
    {
        Some(arg) => values_of(arg, current),
        None => (Vec::new(), DIRECTIVE_NO_FILE_COMP),
    }
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

    fn run(line: &str) -> (Vec<String>, u32) {
        let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
        if line.is_empty() {
            words = vec![String::new()];
        }
        let (candidates, directive) = complete(&Cli::command(), &words);
        (
            candidates
                .iter()
                .map(|c| candidate_value(c).to_string())
                .collect(),
            directive,
        )
    }

    #[test]
    fn completes_words_from_the_command_tree() {
        let cases: Vec<(&str, Vec<&str>, u32)> = vec![
            (
                "",
                vec!["explain", "preempt", "triage", "snapshot", "completion"],
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
                vec!["explain", "preempt", "triage", "snapshot", "completion"],
                4,
            ),
            ("-n shop explain p --config ", vec![], 0),
            (
                "completion ",
                vec!["bash", "elvish", "fish", "kubectl", "powershell", "zsh"],
                4,
            ),
            ("explain ", vec![], 4),
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
        let (candidates, directive) = complete(&Cli::command(), &["explain".into(), "--all-pen".into()]);
        assert_eq!(
            candidates,
            ["--all-pending\tOne line per pending pod (of -n NS, or every namespace with -A)"]
        );
        assert_eq!(
            render(&candidates, directive),
            "--all-pending\tOne line per pending pod (of -n NS, or every namespace with -A)\n:4\n"
        );
    }
}
