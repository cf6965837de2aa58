//! What a load reports besides the objects ([`LoadReport`]), where in a file something is
//! ([`Location`]), and why a load failed ([`LoadError`], [`DecodeError`]); plus the small position
//! helpers the JSON and YAML readers share to fill them in.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// The two input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON (one value or several concatenated).
    Json,
    /// YAML (one or more documents).
    Yaml,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        })
    }
}

/// What a load read, besides the objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// The format the file was read as.
    pub format: Format,
    /// Documents (top-level values) in the file, empty YAML documents included.
    pub documents: usize,
    /// Objects stored in the `ClusterObjects`.
    pub objects: usize,
    /// Objects of kinds the engine does not use, by `Kind (apiVersion)`, e.g. `Deployment (apps/v1)`.
    pub skipped: BTreeMap<String, usize>,
    /// The Kubernetes version a List records in its `kubeVersion` key ([`super::KUBE_VERSION_KEY`],
    /// written by `kubectl sched snapshot`), as written; the first List's that has one. Files from
    /// kubectl have none.
    pub kube_version: Option<String>,
}

impl LoadReport {
    pub(super) fn new(format: Format) -> Self {
        LoadReport {
            format,
            documents: 0,
            objects: 0,
            skipped: BTreeMap::new(),
            kube_version: None,
        }
    }

    /// Keeps a List's `kubeVersion` (a string; any other value is not one and is ignored), unless an
    /// earlier List recorded one.
    pub(super) fn record_version(&mut self, value: Option<&str>) {
        if self.kube_version.is_none() {
            self.kube_version = value.map(str::to_string);
        }
    }

    /// How many objects were skipped in all.
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    /// One line per skipped kind (the CLI prints them with `-v`), e.g. `skipped 2 object(s) of kind
    /// Deployment (apps/v1): not used by the scheduler`.
    pub fn notes(&self) -> Vec<String> {
        self.lines(false)
    }

    /// One line per kind the engine reads that was skipped because of its apiVersion
    /// (`policy/v1beta1` PodDisruptionBudgets from an old cluster, a typo): those objects are ignored and
    /// the answer may differ, so the CLI always prints these.
    pub fn warnings(&self) -> Vec<String> {
        self.lines(true)
    }

    fn lines(&self, misversioned: bool) -> Vec<String> {
        self.skipped
            .iter()
            .filter_map(|(key, n)| {
                let kind = key.split_once(" (").map_or(key.as_str(), |(k, _)| k);
                match (super::kind::ObjectKind::api_version_of(kind), misversioned) {
                    (Some(read), true) => Some(format!(
                        "skipped {n} object(s) of kind {key}: kubectl-sched reads {kind} as {read} only, so \
                         these are ignored"
                    )),
                    (None, false) => Some(format!(
                        "skipped {n} object(s) of kind {key}: not used by the scheduler"
                    )),
                    _ => None,
                }
            })
            .collect()
    }

    pub(super) fn skip(&mut self, api_version: Option<&str>, kind: &str) {
        let key = format!("{kind} ({})", api_version.unwrap_or("no apiVersion"));
        *self.skipped.entry(key).or_insert(0) += 1;
    }
}

/// Where in a file something is: `document[d].items[i]`, plus the line and column when known.
///
/// Indices are 0-based (as in a JSON path); line and column are 1-based (as editors show them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// Index of the document (top-level value) in the file.
    pub document: usize,
    /// Index within the document's `items` when the document is a List.
    pub item: Option<usize>,
    /// 1-based line.
    pub line: Option<usize>,
    /// 1-based column.
    pub column: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document[{}]", self.document)?;
        if let Some(i) = self.item {
            write!(f, ".items[{i}]")?;
        }
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " (line {l}, column {c})"),
            (Some(l), None) => write!(f, " (line {l})"),
            _ => Ok(()),
        }
    }
}

/// Why a snapshot file could not be loaded. Every variant names the file; all but `Io` say where.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The text is not well-formed JSON/YAML (or not UTF-8).
    #[error("{}: {at}: malformed {format}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The format the file was read as.
        format: Format,
        /// Where the parser stopped.
        at: Location,
        /// The parser's message (without its own position suffix).
        message: String,
    },
    /// A document or item is not an object with a kind (e.g. a bare string, or no `kind` field).
    #[error("{}: {at}: {message}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// The document or item.
        at: Location,
        /// What is wrong.
        message: String,
    },
    /// An object of a known kind does not match its schema (e.g. a string where a number belongs).
    #[error(transparent)]
    Decode(Box<DecodeError>),
    /// A quantity the engine reads does not parse (`cpu: oops`): the API server would have refused it,
    /// and counting it as 0 would explain a cluster that cannot exist.
    #[error("{}: {source}", path.display())]
    Quantity {
        /// The file.
        path: PathBuf,
        /// The object, the field and the text.
        #[source]
        source: super::quantities::BadQuantity,
    },
    /// A pod without `spec.priority` names a PriorityClass the file does not hold: the API server's
    /// Priority admission plugin would have refused it.
    #[error("{}: {source}", path.display())]
    Priority {
        /// The file.
        path: PathBuf,
        /// The pod and the class.
        #[source]
        source: super::priority::PriorityRefused,
    },
    /// Two objects of one kind have the same name (namespace/name): a cluster holds one.
    #[error("{}: {source}", path.display())]
    Duplicate {
        /// The file.
        path: PathBuf,
        /// The kind, the name and where the two are.
        #[source]
        source: super::duplicates::Duplicate,
    },
}

/// An object of a known kind that does not match its schema.
#[derive(Debug, thiserror::Error)]
#[error("{}: {at}: {kind} {}: {message}", path.display(), name.as_deref().unwrap_or("(unnamed)"))]
pub struct DecodeError {
    /// The file.
    pub path: PathBuf,
    /// The object, and the offending position when the parser reports one.
    pub at: Location,
    /// The object's apiVersion.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// `namespace/name` or `name`, when the object has one.
    pub name: Option<String>,
    /// The decoder's message, prefixed with the field path when known.
    pub message: String,
}

/// Splits serde's "... at line L column C" suffix off a message.
pub(super) fn strip_position(message: &str) -> String {
    if let Some(i) = message.rfind(" at line ") {
        let tail = &message[i + " at line ".len()..];
        let well_formed = tail
            .split_once(" column ")
            .is_some_and(|(l, c)| l.parse::<usize>().is_ok() && c.parse::<usize>().is_ok());
        if well_formed {
            return message[..i].to_string();
        }
    }
    message.to_string()
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let offset = offset.min(bytes.len());
    let before = &bytes[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    (line, column)
}

pub(super) fn display_name(namespace: Option<&str>, name: Option<&str>) -> Option<String> {
    match (namespace.filter(|n| !n.is_empty()), name) {
        (Some(ns), Some(n)) => Some(format!("{ns}/{n}")),
        (None, Some(n)) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_position_only_removes_a_real_suffix() {
        assert_eq!(strip_position("bad at line 3 column 4"), "bad");
        assert_eq!(strip_position("look at line up"), "look at line up");
    }
}
