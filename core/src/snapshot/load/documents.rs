//! The documents of a small input file (`-f`, `--add-nodes`): JSON when its first significant
//! character is `{` or `[`, as kubectl's YAML-or-JSON decoder tells them apart, else YAML.
//!
//! JSON is read by serde_json (its own recursion limit, 128, refuses deep nesting cheaply), one
//! value after another; `---` and `...` lines and `#` comment lines between values are skipped, so a
//! YAML stream whose documents are JSON reads either way. YAML goes through the flow depth guard
//! ([`super::check_flow_depth`]) and then yaml_serde. Either way an error names the document and,
//! when the parser knows it, the line and column in the file.

use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::error::{line_column, strip_position};

/// A document that could not be read or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("document {document}: {message}{}", Position(*.line, *.column))]
pub struct DocumentError {
    /// The document (0-based), as `---` lines (or concatenated JSON values) number them.
    pub document: usize,
    /// What is wrong (with the field path when decoding into a type).
    pub message: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// 1-based column in the file, when known.
    pub column: Option<usize>,
}

/// ` at line L column C`, or nothing when the position is unknown.
struct Position(Option<usize>, Option<usize>);

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (Some(line), Some(column)) => write!(f, " at line {line} column {column}"),
            (Some(line), None) => write!(f, " at line {line}"),
            _ => Ok(()),
        }
    }
}

/// True when `text` is read as JSON: its first character other than whitespace (and a byte order
/// mark) opens an object or an array.
pub fn is_json(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['))
}

/// Every document of `text` as a JSON value (an empty YAML document is `null`).
pub fn read_documents(text: &str) -> Result<Vec<serde_json::Value>, DocumentError> {
    if is_json(text) {
        return json_documents(text)?
            .iter()
            .enumerate()
            .map(|(i, raw)| decode_json(text, i, raw, ""))
            .collect();
    }
    check_yaml(text)?;
    yaml_serde::Deserializer::from_str(text)
        .enumerate()
        .map(|(i, doc)| serde_json::Value::deserialize(doc).map_err(|e| yaml_error(i, &e, "")))
        .collect()
}

/// Document `index` of `text` decoded as `T` straight from the text, so that an error carries the
/// field path, line and column; `what` (a kind) starts the message.
pub fn decode_document<T: DeserializeOwned>(
    text: &str,
    index: usize,
    what: &str,
) -> Result<T, DocumentError> {
    let missing = || DocumentError {
        document: index,
        message: "no such document".into(),
        line: None,
        column: None,
    };
    if is_json(text) {
        let documents = json_documents(text)?;
        let raw = documents.get(index).ok_or_else(missing)?;
        return decode_json(text, index, raw, what);
    }
    check_yaml(text)?;
    let doc = yaml_serde::Deserializer::from_str(text)
        .nth(index)
        .ok_or_else(missing)?;
    T::deserialize(doc).map_err(|e| yaml_error(index, &e, what))
}

fn check_yaml(text: &str) -> Result<(), DocumentError> {
    super::check_flow_depth(text.as_bytes()).map_err(|e| DocumentError {
        document: e.document,
        message: e.to_string(),
        line: Some(e.line),
        column: Some(e.column),
    })
}

fn prefixed(what: &str, message: String) -> String {
    if what.is_empty() {
        message
    } else {
        format!("{what}: {message}")
    }
}

fn yaml_error(document: usize, e: &yaml_serde::Error, what: &str) -> DocumentError {
    let message = e.to_string();
    // yaml_serde puts the position last, except in messages that name two ("... at line 4 column 1,
    // while parsing a flow mapping at line 3 column 11"), which are kept whole.
    let suffix = e
        .location()
        .map(|l| (format!(" at line {} column {}", l.line(), l.column()), l));
    let (message, line, column) = match suffix {
        Some((suffix, l)) if message.ends_with(&suffix) => (
            message[..message.len() - suffix.len()].to_string(),
            Some(l.line()),
            Some(l.column()),
        ),
        _ => (message, None, None),
    };
    DocumentError {
        document,
        message: prefixed(what, message),
        line,
        column,
    }
}

/// The byte offset of `inner` in `outer` (a slice of it).
fn offset_in(outer: &str, inner: &str) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}

/// Decodes one JSON document, its error placed in the whole file (serde_json counts from the
/// document's first character) and its field path in front.
fn decode_json<T: DeserializeOwned>(
    text: &str,
    document: usize,
    raw: &RawValue,
    what: &str,
) -> Result<T, DocumentError> {
    // A raw value is one whole JSON value: nothing trails it.
    let mut de = serde_json::Deserializer::from_str(raw.get());
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = place(text, offset_in(text, raw.get()), inner.line(), inner.column());
        let message = strip_position(&inner.to_string());
        // The field path says where a value has the wrong type; a syntax error has only a position.
        let data = inner.classify() == serde_json::error::Category::Data;
        let message = if !data || path == "." {
            message
        } else {
            format!("{path}: {message}")
        };
        DocumentError {
            document,
            message: prefixed(what, message),
            line,
            column,
        }
    })
}

/// serde_json's `line`/`column` (1-based; 0 when unknown) in a document starting at byte `start` of
/// `text`, as a line and column of `text`.
fn place(text: &str, start: usize, line: usize, column: usize) -> (Option<usize>, Option<usize>) {
    if line == 0 {
        return (None, None);
    }
    let (start_line, start_column) = line_column(text.as_bytes(), start);
    let column = if line == 1 {
        start_column + column - 1
    } else {
        column
    };
    (Some(start_line + line - 1), Some(column))
}

/// The top-level JSON values of `text`, split without building them (serde_json's raw values skip
/// nested values without recursing), and the separators YAML streams put between them.
fn json_documents(text: &str) -> Result<Vec<&RawValue>, DocumentError> {
    let mut documents = Vec::new();
    let mut rest = skip_separators(text);
    while !rest.is_empty() {
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<&RawValue>();
        match stream.next() {
            Some(Ok(raw)) => documents.push(raw),
            Some(Err(e)) => {
                let (line, column) = place(text, offset_in(text, rest), e.line(), e.column());
                return Err(DocumentError {
                    document: documents.len(),
                    message: strip_position(&e.to_string()),
                    line,
                    column,
                });
            }
            None => break,
        }
        rest = skip_separators(&rest[stream.byte_offset()..]);
    }
    Ok(documents)
}

/// `text` past whitespace, `---`/`...` lines and `#` comment lines.
pub(super) fn skip_separators(mut text: &str) -> &str {
    loop {
        text = text.trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n']);
        let line_end = text.find('\n').unwrap_or(text.len());
        let line = text[..line_end].trim_end();
        if line == "---" || line == "..." || line.starts_with('#') {
            text = &text[line_end..];
        } else {
            return text;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_yaml_documents_read_alike() {
        let cases = [
            (
                "one JSON object",
                "{\"kind\": \"Pod\"}",
                vec![serde_json::json!({"kind": "Pod"})],
            ),
            (
                "concatenated JSON values",
                "{\"a\": 1}\n{\"b\": [2]}",
                vec![serde_json::json!({"a": 1}), serde_json::json!({"b": [2]})],
            ),
            (
                "a YAML stream of JSON documents, starting with JSON",
                "{\"a\": 1}\n---\n# next\n{\"b\": 2}\n...\n",
                vec![serde_json::json!({"a": 1}), serde_json::json!({"b": 2})],
            ),
            (
                "a JSON array",
                " \n[1, {\"a\": []}]",
                vec![serde_json::json!([1, {"a": []}])],
            ),
            (
                "YAML",
                "a: 1\n---\nb: [2]\n",
                vec![serde_json::json!({"a": 1}), serde_json::json!({"b": [2]})],
            ),
            (
                "a YAML stream of JSON documents, starting with ---",
                "---\n{\"a\": \"it's [\"}\n---\n{\"b\": \"k:{\\\"x\\\"}\"}\n",
                vec![
                    serde_json::json!({"a": "it's ["}),
                    serde_json::json!({"b": "k:{\"x\"}"}),
                ],
            ),
        ];
        for (name, text, want) in cases {
            assert_eq!(read_documents(text), Ok(want), "{name}");
        }
    }

    #[test]
    fn errors_name_the_document_line_and_column() {
        let error = |document, message: &str, line, column| DocumentError {
            document,
            message: message.into(),
            line: Some(line),
            column: Some(column),
        };
        let deep = "[".repeat(200) + &"]".repeat(200);
        let cases = [
            (
                "JSON syntax, second document",
                "{\"a\": 1}\n{\"b\": ,}\n".to_string(),
                error(1, "expected value", 2, 7),
            ),
            (
                "JSON nested past serde_json's limit",
                format!("{{\"a\": {deep}}}"),
                error(0, "recursion limit exceeded", 1, 133),
            ),
            (
                "YAML nested past the guard",
                format!("---\na: 1\n---\nb: {deep}\n"),
                error(
                    1,
                    "flow collections ([ or {) nested more than 128 levels deep",
                    4,
                    132,
                ),
            ),
        ];
        for (name, text, want) in cases {
            assert_eq!(read_documents(&text), Err(want), "{name}");
        }
        let pod = "{\"kind\": \"Pod\"}\n{\"kind\": \"Pod\",\n \"spec\": {\"containers\": 7}}";
        assert_eq!(
            decode_document::<k8s_openapi::api::core::v1::Pod>(pod, 1, "Pod").map(drop),
            Err(error(
                1,
                "Pod: spec.containers: invalid type: integer `7`, expected a sequence",
                3,
                25
            ))
        );
        let yaml = "kind: Pod\nspec:\n  containers: 7\n";
        let e = decode_document::<k8s_openapi::api::core::v1::Pod>(yaml, 0, "Pod").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("document 0: Pod: spec.containers: invalid type"),
            "{e}"
        );
        assert_eq!(e.line, Some(3), "{e}");
    }
}
