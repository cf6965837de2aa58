//! Loading [`ClusterObjects`] from a file, and writing them back as one `kind: List`.
//!
//! Accepted input, JSON or YAML (told apart by the first non-blank character):
//! - a `kind: List` whose items mix kinds, as `kubectl get nodes,pods,... -A -o yaml|json` prints it;
//! - a typed list as the API server returns it (`kind: PodList`, items without apiVersion/kind);
//! - several documents (YAML `---` separated, or concatenated JSON values), each a List or one object;
//! - a single object.
//!
//! Objects are dispatched on apiVersion + kind into the typed k8s-openapi objects of `ClusterObjects`;
//! other kinds are skipped and counted in the [`LoadReport`]. Every stored object is pruned of what the
//! scheduler never reads ([`Prune`]), which keeps a 150,000-pod snapshot small in memory.
//!
//! JSON is the fast path: the file is split into raw item slices without building a value tree, and
//! items are decoded straight into typed objects in parallel. YAML goes through one small value tree
//! per item, sequentially (yaml_serde has no borrowed raw values), so large snapshots should be JSON.
//!
//! This file holds the entry points; each other file has one job: `documents` (the documents of a
//! small `-f` file, JSON or YAML, as JSON values), `error` (the report, locations
//! and errors), `priority` (pods get the priority admission gives), `duplicates` (one object per
//! name), `prune` (the pruning policy, [`Prune`]), `quantities` (every quantity parses and is sane),
//! `shape` (pruning while decoding: decode shapes and their serde adapter), `kind` (kind resolution,
//! [`ObjectKind`]), `json` (peek and parallel decode), `stream` (the streaming JSON scanner), `yaml`,
//! `yaml_depth` (a linear guard against deep flow nesting, which libyaml parses in quadratic time: libyaml's
//! own tokenizing, counting flow levels) and
//! `write` (the `kind: List` writer). Their public items are re-exported here.

mod documents;
mod duplicates;
mod error;
mod json;
mod kind;
mod list_split;
mod priority;
mod prune;
mod quantities;
mod shape;
mod stream;
mod write;
mod yaml;
mod yaml_depth;

#[cfg(test)]
mod tests;

use std::io;
use std::path::Path;

pub use documents::{DocumentError, decode_document, is_json, read_documents};
pub use duplicates::Duplicate;
pub use error::{DecodeError, Format, LoadError, LoadReport, Location};
#[cfg(feature = "kube")]
pub(crate) use json::ApiListMeta;
pub use json::{ListPageMeta, PageError, decode_list_page};
pub use kind::ObjectKind;
pub use list_split::{ListSplitter, SplitError};
pub use priority::PriorityRefused;
pub(crate) use priority::needs_priority;
pub use prune::{
    KEPT_ANNOTATION_PREFIXES, Prune, keep_annotation, prune_container, prune_metadata, prune_node, prune_pod,
    prune_pod_spec, prune_pod_status, retain_annotations,
};
pub use quantities::{BadQuantity, MAX_AMOUNT, Problem, check_node, check_pod, check_pvc};
pub use write::{
    KUBE_VERSION_KEY, ListView, write_list_json, write_list_yaml, write_versioned_list_json,
    write_versioned_list_yaml,
};
pub use yaml_depth::{MAX_FLOW_DEPTH, TooDeep, check_flow_depth};

use super::{ClusterObjects, PodDetail, Snapshot};
use error::line_column;
use json::load_json;
use stream::{CHUNK, stream_json_file};
use yaml::load_yaml;

/// Reads a snapshot file (JSON or YAML). Objects are pruned.
///
/// JSON files are streamed: read and decoded chunk by chunk, in parallel, so memory holds the pruned
/// objects plus one chunk. Anything the streaming reader does not handle (an error in the file, a
/// typed list whose items carry no kind) makes it start over reading the whole file exactly.
pub fn load_file(path: impl AsRef<Path>) -> Result<(ClusterObjects, LoadReport), LoadError> {
    load_file_with(path, &PodDetail::Full)
}

/// [`load_file`], keeping pods on nodes only as much as `detail` says. With
/// [`PodDetail::CompactPlaced`] a large JSON file never holds all its pods' container specs at once.
pub fn load_file_with(
    path: impl AsRef<Path>,
    detail: &PodDetail,
) -> Result<(ClusterObjects, LoadReport), LoadError> {
    let path = path.as_ref();
    let io_error = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    if sniff_json(path).map_err(io_error)?
        && let Ok(loaded) = stream_json_file(path, CHUNK, detail)
    {
        // Pods reduced while streaming were checked before (a bad one makes the stream fall back).
        let (mut objects, report) = loaded;
        quantities::check(&objects).map_err(|source| LoadError::Quantity {
            path: path.to_path_buf(),
            source,
        })?;
        after_decode(&mut objects, path)?;
        // Pods kept whole only until admission gave them a priority are reduced now.
        detail.compact(&mut objects.pods, &mut objects.placed_pods);
        return Ok((objects, report));
    }
    let bytes = std::fs::read(path).map_err(io_error)?;
    let (mut objects, report) = load_bytes(&bytes, path)?;
    detail.compact(&mut objects.pods, &mut objects.placed_pods);
    Ok((objects, report))
}

/// True when the file's first significant byte opens a JSON object.
fn sniff_json(path: &Path) -> io::Result<bool> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)?.take(4096).read_to_end(&mut head)?;
    Ok(first_significant(&head) == Some(b'{'))
}

/// Reads a snapshot from memory; `origin` names it in errors (a path, or `-` for stdin).
pub fn load_bytes(bytes: &[u8], origin: &Path) -> Result<(ClusterObjects, LoadReport), LoadError> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let (line, column) = line_column(bytes, e.valid_up_to());
            let format = if first_significant(bytes).is_some_and(|b| b == b'{' || b == b'[') {
                Format::Json
            } else {
                Format::Yaml
            };
            return Err(LoadError::Syntax {
                path: origin.to_path_buf(),
                format,
                at: Location {
                    document: 0,
                    item: None,
                    line: Some(line),
                    column: Some(column),
                },
                message: format!("invalid UTF-8 at byte {}", e.valid_up_to()),
            });
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (mut objects, report) = match first_significant(text.as_bytes()) {
        Some(b'{') | Some(b'[') => load_json(text, origin),
        _ => load_yaml(text, origin),
    }?;
    quantities::check(&objects).map_err(|source| LoadError::Quantity {
        path: origin.to_path_buf(),
        source,
    })?;
    after_decode(&mut objects, origin)?;
    Ok((objects, report))
}

/// What every loader does once the objects are decoded and their quantities checked: pods get the
/// priority admission would give them ([`priority`]), and an object that appears twice is refused
/// ([`duplicates`]).
fn after_decode(objects: &mut ClusterObjects, path: &Path) -> Result<(), LoadError> {
    duplicates::check(objects).map_err(|source| LoadError::Duplicate {
        path: path.to_path_buf(),
        source,
    })?;
    priority::admit_priorities(objects).map_err(|source| LoadError::Priority {
        path: path.to_path_buf(),
        source,
    })
}

impl Snapshot {
    /// Loads a snapshot file and builds the `Snapshot`; the report lists skipped kinds.
    pub fn from_file(path: impl AsRef<Path>) -> Result<(Snapshot, LoadReport), LoadError> {
        let (objects, report) = load_file(path)?;
        Ok((Snapshot::new(objects), report))
    }
}

fn first_significant(bytes: &[u8]) -> Option<u8> {
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}
