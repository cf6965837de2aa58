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
    /// `-o` is neither a format nor a file name.
    #[error("{0}")]
    Format(String),
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

/// Where the snapshot goes and in which format: `-o` is the format and `--output-file` the file, as
/// kubectl's `-o`; stdout when no file is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// JSON rather than YAML.
    pub json: bool,
    /// The file (None: stdout).
    pub file: Option<PathBuf>,
    /// Said on stderr: an old `-o FILE` still honoured.
    pub warning: Option<String>,
}

/// `snapshot`'s formats, as kubectl's printer error lists them.
const SNAPSHOT_FORMATS: &str = "json,yaml";

/// Reads `-o` and `--output-file`. Before `-o` meant the format, it named the file: a value that cannot
/// be a format but is plainly a file name (`snap.yaml`, `out/snap`) still writes that file, with a
/// warning; a bare word that is neither (`wide`) is refused in kubectl's words.
pub fn destination(args: &SnapshotArgs) -> Result<Destination, SnapshotError> {
    let format = args.output.as_deref().map(str::to_ascii_lowercase);
    match (format.as_deref(), &args.output_file) {
        (Some(f @ ("json" | "yaml")), file) => Ok(Destination {
            json: f == "json",
            file: file.clone(),
            warning: None,
        }),
        (None, file) => Ok(Destination {
            json: file.as_deref().is_some_and(is_json),
            file: file.clone(),
            warning: None,
        }),
        (Some(_), None) if args.output.as_deref().is_some_and(looks_like_a_file) => {
            let path = PathBuf::from(args.output.clone().unwrap_or_default());
            Ok(Destination {
                json: is_json(&path),
                warning: Some(format!(
                    "-o {} is read as a file name, as before; -o is now the format (yaml or json), as \
                     kubectl's: use --output-file {}",
                    path.display(),
                    path.display()
                )),
                file: Some(path),
            })
        }
        (Some(_), _) => Err(SnapshotError::Format(format!(
            "unable to match a printer suitable for the output format {:?}, allowed formats are: \
             {SNAPSHOT_FORMATS} (the file is --output-file FILE)",
            args.output.as_deref().unwrap_or_default()
        ))),
    }
}

/// A `-o` value that can only be a file name: it has a directory or an extension.
fn looks_like_a_file(value: &str) -> bool {
    let path = Path::new(value);
    value.contains(std::path::MAIN_SEPARATOR) || value.contains('/') || path.extension().is_some()
}

/// Runs `snapshot`. Every namespace is dumped unless `-n` restricts it (then the file is partial).
pub fn run(global: &GlobalArgs, args: &SnapshotArgs) -> Result<SnapshotOutput, SnapshotError> {
    // Checked first: a wrong -o must not cost a whole listing.
    let destination = destination(args)?;
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
    warnings.extend(destination.warning.clone());
    match &destination.file {
        None => {
            let bytes = render(destination.json).map_err(|message| SnapshotError::Write {
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
            let bytes = render(destination.json).map_err(write_err)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(output: Option<&str>, file: Option<&str>) -> SnapshotArgs {
        SnapshotArgs {
            output: output.map(str::to_string),
            output_file: file.map(PathBuf::from),
        }
    }

    #[test]
    fn the_format_is_o_and_the_file_is_output_file() {
        // (-o, --output-file) → (json, file, warned)
        for (output, file, want) in [
            (None, None, Some((false, None, false))),
            (Some("yaml"), None, Some((false, None, false))),
            (Some("json"), None, Some((true, None, false))),
            (Some("JSON"), Some("s.yaml"), Some((true, Some("s.yaml"), false))),
            (None, Some("s.json"), Some((true, Some("s.json"), false))),
            (None, Some("s.yaml"), Some((false, Some("s.yaml"), false))),
            // Old invocations, still honoured where they can only mean a file.
            (Some("snap.yaml"), None, Some((false, Some("snap.yaml"), true))),
            (
                Some("out/snap.json"),
                None,
                Some((true, Some("out/snap.json"), true)),
            ),
            // Neither a format nor plainly a file, or a file twice: refused.
            (Some("wide"), None, None),
            (Some("snap"), None, None),
            (Some("snap.yaml"), Some("other.yaml"), None),
        ] {
            let got = destination(&args(output, file));
            match want {
                Some((json, file, warned)) => {
                    let got = got.unwrap_or_else(|e| panic!("{output:?} {file:?}: {e}"));
                    assert_eq!(got.json, json, "{output:?} {file:?}");
                    assert_eq!(got.file, file.map(PathBuf::from), "{output:?} {file:?}");
                    assert_eq!(got.warning.is_some(), warned, "{output:?} {file:?}");
                }
                None => {
                    let err = got.expect_err(&format!("{output:?} {file:?}")).to_string();
                    assert!(
                        err.starts_with("unable to match a printer suitable for the output format")
                            && err.contains("allowed formats are: json,yaml"),
                        "{err}"
                    );
                }
            }
        }
    }
}
