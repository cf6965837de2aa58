//! `snapshot`: lists what the engine needs from the API server and writes it as one `kind: List`, the
//! input `explain --from` reads back, recording the API server's version (`kubeVersion`) so that the
//! file is evaluated with that release's semantics.

use std::io::Write;
use std::path::{Path, PathBuf};

use sched_core::snapshot::PodDetail;
use sched_core::snapshot::{write_versioned_list_json, write_versioned_list_yaml};

use crate::cli::{GlobalArgs, SnapshotArgs};
use crate::source::load::{Cluster, LoadError};
use crate::source::release::server_release;

/// Why the snapshot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Listing failed.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// The output file could not be written.
    #[error("{path}: {message}")]
    Write {
        /// The file ("-" for stdout).
        path: String,
        /// Why.
        message: String,
    },
}

impl From<LoadError> for SnapshotError {
    fn from(e: LoadError) -> Self {
        SnapshotError::Load(Box::new(e))
    }
}

/// What `snapshot` did.
#[derive(Debug)]
pub struct SnapshotOutput {
    /// The document, when it goes to stdout.
    pub stdout: Option<Vec<u8>>,
    /// Always shown.
    pub warnings: Vec<String>,
    /// Shown with `-v 1`.
    pub notes: Vec<String>,
}

fn is_json(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// Runs `snapshot`. Every namespace is dumped unless `-n` restricts it (then the file is partial).
pub fn run(global: &GlobalArgs, args: &SnapshotArgs) -> Result<SnapshotOutput, SnapshotError> {
    let cluster = Cluster::connect(global)?;
    let namespace = if global.all_namespaces {
        None
    } else {
        global.namespace.as_deref()
    };
    let started = std::time::Instant::now();
    let (objects, mut warnings, info) = cluster.load_with_version(namespace, &PodDetail::Full)?;
    // Recorded whatever it is, even outside the supported range: explain --from says so then.
    let version = info.as_ref().and_then(server_release);
    if version.is_none() {
        warnings.push(
            "the API server's version could not be read: the file records none, and explain --from will \
             evaluate it with the pinned release unless --kube-version says otherwise"
                .to_string(),
        );
    }
    if let Some(ns) = namespace {
        warnings.push(format!(
            "only namespace {ns:?} was dumped: pods of other namespaces also use nodes and match affinity \
             terms, so explain --from on this file can differ from a live explain (use -A)"
        ));
    }
    let mut notes = vec![format!(
        "listed {} object(s) ({} nodes, {} pods) from {} in {:.0} ms",
        objects.len(),
        objects.nodes.len(),
        objects.pods.len(),
        cluster.server,
        started.elapsed().as_secs_f64() * 1000.0
    )];
    let render = |json: bool| -> Result<Vec<u8>, String> {
        let mut buf = Vec::new();
        if json {
            write_versioned_list_json(&objects, version, &mut buf).map_err(|e| e.to_string())?;
            buf.push(b'\n');
        } else {
            write_versioned_list_yaml(&objects, version, &mut buf).map_err(|e| e.to_string())?;
        }
        Ok(buf)
    };
    match &args.output {
        None => {
            let bytes = render(false).map_err(|message| SnapshotError::Write {
                path: "-".into(),
                message,
            })?;
            Ok(SnapshotOutput {
                stdout: Some(bytes),
                warnings,
                notes,
            })
        }
        Some(path) => {
            let write_err = |message: String| SnapshotError::Write {
                path: path.display().to_string(),
                message,
            };
            let bytes = render(is_json(path)).map_err(write_err)?;
            write_file(path, &bytes).map_err(|e| write_err(e.to_string()))?;
            notes.push(format!("wrote {} bytes to {}", bytes.len(), path.display()));
            Ok(SnapshotOutput {
                stdout: None,
                warnings,
                notes,
            })
        }
    }
}

/// Writes through a temporary file in the same directory, so a failed dump never leaves a truncated
/// snapshot behind.
fn write_file(path: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp~");
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
