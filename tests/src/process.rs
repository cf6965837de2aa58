//! Child processes of a control plane: the components themselves and the watchdog that makes
//! sure none of them outlives the test process.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

/// The watchdog reads its stdin, a pipe whose only write end the test process holds, until
/// end-of-file: that comes when the control plane is dropped or, whatever the way, the test
/// process ends, since the kernel closes the descriptors of a dying process. It then kills the
/// components' process group (announced on the pipe as `pgid=<n>`) and removes the temporary
/// directory, which a shared control plane held in a `static` never gets to remove itself.
/// It ignores SIGINT and SIGHUP and sits in its own process group, so a Ctrl-C aimed at
/// `cargo test` reaches the test process but cannot stop the cleanup.
const WATCHDOG_SCRIPT: &str = r#"
trap '' INT HUP
pgid=
while IFS= read -r line; do
  case "$line" in
    pgid=*) pgid=${line#pgid=} ;;
  esac
done
if [ -n "$pgid" ]; then
  kill -KILL "-$pgid" 2>/dev/null
fi
# A component killed an instant ago may still be finishing a write in the directory: retry.
i=0
while [ -e "$1" ] && [ "$i" -lt 25 ]; do
  rm -rf -- "$1" 2>/dev/null
  [ -e "$1" ] && sleep 0.2
  i=$((i + 1))
done
"#;

/// How long teardown waits for the watchdog, or for a process sent SIGKILL; only a process stuck
/// in the kernel takes longer, and a test run should not hang on it.
const REAP_TIMEOUT: Duration = Duration::from_secs(15);

pub(crate) struct Watchdog {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl Watchdog {
    pub(crate) fn spawn(dir: &Path) -> Result<Self, Error> {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("kubectl-sched-e2e-watchdog")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(Error::io("starting the watchdog (/bin/sh)"))?;
        let pipe = child.stdin.take();
        Ok(Self { child, pipe })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Tells the watchdog which process group to kill when the pipe closes.
    pub(crate) fn guard_group(&mut self, pgid: u32) -> Result<(), Error> {
        let pipe = self.pipe.as_mut().ok_or_else(|| Error::Io {
            context: "announcing the process group to the watchdog".into(),
            source: std::io::Error::new(std::io::ErrorKind::BrokenPipe, "watchdog already fired"),
        })?;
        writeln!(pipe, "pgid={pgid}")
            .and_then(|()| pipe.flush())
            .map_err(Error::io("announcing the process group to the watchdog"))
    }

    /// Closes the pipe, so the watchdog kills the group and removes the directory, and waits for
    /// it to finish.
    pub(crate) fn fire(&mut self) {
        self.pipe = None;
        reap(&mut self.child, REAP_TIMEOUT);
    }
}

/// One component process; stdout and stderr both go to `log`.
pub(crate) struct Component {
    pub name: &'static str,
    pub pid: u32,
    pub log: PathBuf,
    child: Child,
}

impl Component {
    /// Starts `program` in process group `group`, or as the leader of a new group when `None`
    /// (the first component), never in the test process's own group.
    pub(crate) fn spawn(
        name: &'static str,
        program: &Path,
        args: &[OsString],
        log: PathBuf,
        group: Option<u32>,
    ) -> Result<Self, Error> {
        let out = File::create(&log).map_err(Error::io(format!("creating {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(Error::io(format!("duplicating {}", log.display())))?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(group.map_or(0, |g| g as i32))
            .spawn()
            .map_err(Error::io(format!("starting {}", program.display())))?;
        Ok(Self {
            name,
            pid: child.id(),
            log,
            child,
        })
    }

    /// The exit status if the process has already ended.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// A startup error for this component, ending with the tail of its log.
    pub(crate) fn startup_error(&self, reason: impl Into<String>) -> Error {
        Error::Startup {
            component: self.name.to_owned(),
            reason: reason.into(),
            log: self.log.clone(),
            tail: log_tail(&self.log, 40),
        }
    }

    /// Fails with the log tail if the process is no longer running.
    pub(crate) fn check_running(&mut self) -> Result<(), Error> {
        match self.exited() {
            Some(status) => Err(self.startup_error(format!("exited with {status}"))),
            None => Ok(()),
        }
    }

    pub(crate) fn kill_and_reap(&mut self) {
        reap(&mut self.child, Duration::ZERO);
    }
}

/// Waits up to `grace` for `child` to exit by itself, then SIGKILLs it and waits at most
/// [`REAP_TIMEOUT`] more.
fn reap(child: &mut Child, grace: Duration) {
    if wait_until(child, Instant::now() + grace) {
        return;
    }
    let _ = child.kill();
    wait_until(child, Instant::now() + REAP_TIMEOUT);
}

/// Whether `child` has exited (and is reaped) by `deadline`.
fn wait_until(child: &mut Child, deadline: Instant) -> bool {
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// The last `lines` lines of a log file (reading only its end, logs can be large).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    const MAX: u64 = 16 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(MAX)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(err) => format!("(cannot read {}: {err})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.log");
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).expect("write");
        assert_eq!(log_tail(&path, 3), "line 98\nline 99\nline 100");
        assert!(log_tail(&dir.path().join("absent.log"), 3).starts_with("(cannot read"));
    }

    #[test]
    fn the_watchdog_kills_the_group_and_removes_the_directory_when_the_pipe_closes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let doomed = dir.path().join("doomed");
        std::fs::create_dir(&doomed).expect("mkdir");
        let mut watchdog = Watchdog::spawn(&doomed).expect("watchdog");
        let mut sleeper = Component::spawn(
            "sleep",
            Path::new("/bin/sleep"),
            &["300".into()],
            dir.path().join("sleep.log"),
            None,
        )
        .expect("sleep");
        watchdog.guard_group(sleeper.pid).expect("announce");
        assert!(sleeper.exited().is_none());
        watchdog.fire();
        let deadline = Instant::now() + Duration::from_secs(10);
        while sleeper.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(sleeper.exited().is_some(), "the group was not killed");
        assert!(!doomed.exists(), "the directory was not removed");
    }
}
