//! kubectl's printers beside each command's own formats, over the document `-o json` prints:
//!
//! - `-o name`: `pod/NAME` lines, as `kubectl get -o name` prints them (without the namespace), for the
//!   pods the report is about ([`NamedPods`]);
//! - `-o jsonpath=TEMPLATE`, `-o jsonpath-file=FILE` and `-o jsonpath-as-json=TEMPLATE`: kubectl's
//!   JSONPath templates (client-go's `util/jsonpath`): text, `{.path}` expressions, `{"quoted text"}` and
//!   `{range .path}...{end}`. Each path is evaluated by jsonpath-rust (RFC 9535, which kubectl's paths
//!   are spelt in: `.a.b`, `[*]`, `[0]`, `[1:3]`, `..name`, `[?(@.x=="y")]`); results print as kubectl
//!   prints them: strings bare, numbers and booleans as text, objects and lists as compact JSON, several
//!   results separated by a space; a missing key prints nothing (kubectl's
//!   `--allow-missing-template-keys` default).

use std::path::PathBuf;

use jsonpath_rust::JsonPath;
use serde_json::Value;

use crate::cli::{JsonFormat, Output, TemplateSource};
use crate::output::Rendered;
use crate::output::data::RenderError;

/// Why a printer could not print.
#[derive(Debug, thiserror::Error)]
pub enum PrinterError {
    /// The command's own rendering failed (the JSON document the printers read, or its own format).
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The template file could not be read.
    #[error("jsonpath-file {}: {message}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The template is malformed (kubectl: `error parsing jsonpath ...`).
    #[error("error parsing jsonpath {template}: {message}")]
    Parse {
        /// The template.
        template: String,
        /// What is wrong.
        message: String,
    },
}

/// Where a document lists the pods it is about, for `-o name`: JSON pointers to a `namespace/name`
/// string, to a list of them, or to a list of objects with `namespace` and `name`.
#[derive(Debug, Clone, Copy)]
pub struct NamedPods(pub &'static [&'static str]);

/// `explain`'s pod (`pod`), or with `--all-pending` each pod evaluated, or with `podgroup/NAME` and
/// `workload/NAME` the groups' pods.
pub const EXPLAIN_PODS: NamedPods = NamedPods(&["/pod", "/*/pod", "/pod_groups/*/members/*/pod"]);
/// The pending pods `triage` triaged, cause by cause.
pub const TRIAGE_PODS: NamedPods = NamedPods(&["/causes/*/workloads/*/pods"]);
/// The pods `simulate` queued (placed or left pending).
pub const SIMULATE_PODS: NamedPods = NamedPods(&["/pods/*/pod"]);
/// The pods `preempt` removes (its victims).
pub const PREEMPT_PODS: NamedPods = NamedPods(&["/victims"]);
/// The pods `preempt podgroup/NAME` removes (its victims, node by node).
pub const PREEMPT_GROUP_PODS: NamedPods = NamedPods(&["/preemption/nodes/*/victims"]);

/// What a command's `-o` asks: its own rendering (`own`), or one of kubectl's printers over the document
/// its `-o json` rendering prints (so that a template sees exactly that document).
pub fn render<F: JsonFormat>(
    output: &Output<F>,
    own: impl FnOnce(F) -> Result<Rendered, RenderError>,
    pods: NamedPods,
) -> Result<Rendered, PrinterError> {
    if let Output::Format(format) = output {
        return Ok(own(*format)?);
    }
    let json = own(F::JSON)?;
    let document: Value =
        serde_json::from_slice(&json.stdout).map_err(|e| PrinterError::Render(RenderError::Json(e)))?;
    let text = match output {
        Output::Format(_) | Output::Name => names(&document, pods),
        Output::JsonPath { source, as_json } => {
            Template::parse(&template_text(source)?)?.render(&document, *as_json)
        }
    };
    Ok(text.into())
}

fn template_text(source: &TemplateSource) -> Result<String, PrinterError> {
    match source {
        TemplateSource::Inline(text) => Ok(text.clone()),
        TemplateSource::File(path) => std::fs::read_to_string(path).map_err(|e| PrinterError::File {
            path: path.clone(),
            message: e.to_string(),
        }),
    }
}

/// `pod/NAME` lines for the pods `pods` points at in `document`, each once, in document order.
pub fn names(document: &Value, pods: NamedPods) -> String {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = String::new();
    for pointer in pods.0 {
        let mut values = Vec::new();
        collect(document, pointer, &mut values);
        let keys = values.into_iter().flat_map(|value| match value {
            Value::Array(items) => items.iter().filter_map(pod_key).collect(),
            other => pod_key(other).into_iter().collect::<Vec<_>>(),
        });
        for key in keys {
            // kubectl's -o name omits the namespace: `pod/NAME`.
            let name = key.rsplit('/').next().unwrap_or(&key).to_string();
            if !name.is_empty() && seen.insert(key) {
                out.push_str(&format!("pod/{name}\n"));
            }
        }
    }
    out
}

/// A pod's `namespace/name` (or name): a string, or an object with `namespace` and `name` (or `pod`).
fn pod_key(value: &Value) -> Option<String> {
    match value {
        Value::String(key) => Some(key.clone()),
        Value::Object(object) => match (object.get("name").and_then(Value::as_str), object.get("pod")) {
            (Some(name), _) => Some(match object.get("namespace").and_then(Value::as_str) {
                Some(ns) => format!("{ns}/{name}"),
                None => name.to_string(),
            }),
            (None, Some(Value::String(key))) => Some(key.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The values at `pointer`, where a `*` segment stands for every element of a list.
fn collect<'a>(value: &'a Value, pointer: &str, out: &mut Vec<&'a Value>) {
    match pointer.split_once("/*") {
        None => out.extend(value.pointer(pointer)),
        Some((head, rest)) => {
            if let Some(Value::Array(items)) = value.pointer(head) {
                for item in items {
                    collect(item, rest, out);
                }
            }
        }
    }
}

/// A parsed kubectl JSONPath template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// Printed as is.
    Text(String),
    /// An RFC 9535 query, printed as kubectl prints results.
    Path(String),
    /// The body, once for each result of the query, with that result as `@` and `$`.
    Range(String, Vec<Node>),
}

impl Template {
    /// Parses kubectl's template syntax; every path is checked once, so that a bad one is refused
    /// before anything is printed.
    pub fn parse(template: &str) -> Result<Template, PrinterError> {
        let error = |message: String| PrinterError::Parse {
            template: template.to_string(),
            message,
        };
        let mut stack: Vec<(String, Vec<Node>)> = Vec::new();
        let mut nodes = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                nodes.push(Node::Text(rest.to_string()));
                break;
            };
            if open > 0 {
                nodes.push(Node::Text(rest[..open].to_string()));
            }
            let (action, after) =
                action(&rest[open + 1..]).ok_or_else(|| error("unclosed action".to_string()))?;
            rest = after;
            let action = action.trim();
            if let Some(text) = quoted(action) {
                nodes.push(Node::Text(text.map_err(error)?));
            } else if action == "end" {
                let (path, outer) = stack
                    .pop()
                    .ok_or_else(|| error("{end} without {range}".to_string()))?;
                let body = std::mem::replace(&mut nodes, outer);
                nodes.push(Node::Range(path, body));
            } else if let Some(path) = action.strip_prefix("range ") {
                let path = query(path.trim()).map_err(error)?;
                stack.push((path, std::mem::take(&mut nodes)));
            } else if action.is_empty() {
                return Err(error("empty action {}".to_string()));
            } else {
                nodes.push(Node::Path(query(action).map_err(error)?));
            }
        }
        if !stack.is_empty() {
            return Err(error("{range} without {end}".to_string()));
        }
        Ok(Template { nodes })
    }

    /// The template over `document`; with `as_json`, each path's results as one JSON list
    /// (kubectl's `jsonpath-as-json`).
    pub fn render(&self, document: &Value, as_json: bool) -> String {
        let mut out = String::new();
        render_nodes(&self.nodes, document, as_json, &mut out);
        if as_json && !out.ends_with('\n') {
            out.push('\n');
        }
        out
    }
}

/// The text of an action up to its closing brace (braces inside quotes do not count), and what follows.
fn action(text: &str) -> Option<(&str, &str)> {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return Some((&text[..i], &text[i + 1..])),
            _ => {}
        }
    }
    None
}

/// A `"quoted"` action's text with Go's escapes, or None when the action is not quoted.
fn quoted(action: &str) -> Option<Result<String, String>> {
    let inner = action.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            other => {
                return Some(Err(format!(
                    "unknown escape \\{}",
                    other.map(String::from).unwrap_or_default()
                )));
            }
        }
    }
    Some(Ok(out))
}

/// kubectl's path as an RFC 9535 query (`.a` → `$.a`, `@.a` → `$.a`), checked to parse.
fn query(path: &str) -> Result<String, String> {
    let query = if let Some(rest) = path.strip_prefix('@') {
        format!("${rest}")
    } else if path.starts_with('$') {
        path.to_string()
    } else if path.starts_with('.') || path.starts_with('[') {
        format!("${path}")
    } else {
        format!("$.{path}")
    };
    Value::Null
        .query(&query)
        .map(|_| ())
        // jsonpath-rust's parse errors draw a caret over several lines: one line here.
        .map_err(|e| {
            format!(
                "{path}: {}",
                e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
            )
        })?;
    Ok(query)
}

fn render_nodes(nodes: &[Node], document: &Value, as_json: bool, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Path(query) => {
                let results = document.query(query).unwrap_or_default();
                if as_json {
                    out.push_str(&pretty(&Value::Array(results.into_iter().cloned().collect())));
                    out.push('\n');
                    continue;
                }
                let texts: Vec<String> = results.into_iter().map(text).collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(query, body) => {
                for item in document.query(query).unwrap_or_default() {
                    // As client-go: a range over a list walks its elements.
                    match item {
                        Value::Array(items) => {
                            for element in items {
                                render_nodes(body, element, as_json, out);
                            }
                        }
                        other => render_nodes(body, other, as_json, out),
                    }
                }
            }
        }
    }
}

/// A result as kubectl prints it: strings bare, objects and lists as compact JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

/// JSON indented by four spaces, as kubectl's `jsonpath-as-json`.
fn pretty(value: &Value) -> String {
    use serde::Serialize;
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut buf, formatter);
    // Serializing a Value into memory cannot fail.
    let _ = value.serialize(&mut serializer);
    String::from_utf8(buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document() -> Value {
        json!({
            "pod": "shop/web-1",
            "nodes": [
                {"name": "n1", "fits": false, "reasons": ["Insufficient cpu"], "score": 3},
                {"name": "n2", "fits": true, "reasons": [], "score": 7.5},
            ],
            "victims": [{"namespace": "shop", "name": "low-1"}, {"namespace": "shop", "name": "low-2"}],
        })
    }

    #[test]
    fn templates_print_as_kubectl_prints_them() {
        for (template, want) in [
            ("{.pod}", "shop/web-1"),
            ("pod: {.pod}\n", "pod: shop/web-1\n"),
            ("{.nodes[*].name}", "n1 n2"),
            ("{.nodes[0].fits}", "false"),
            ("{.nodes[1].score}", "7.5"),
            ("{.nodes[0].reasons}", "[\"Insufficient cpu\"]"),
            ("{.nodes[?(@.fits==true)].name}", "n2"),
            (
                "{range .nodes[*]}{.name}{\"\\t\"}{.score}{\"\\n\"}{end}",
                "n1\t3\nn2\t7.5\n",
            ),
            ("{range .nodes}{@.name},{end}", "n1,n2,"),
            ("{..name}", "n1 n2 low-1 low-2"),
            ("{.missing}", ""),
            ("{\"{}\"}", "{}"),
        ] {
            let parsed = Template::parse(template).unwrap_or_else(|e| panic!("{template}: {e}"));
            assert_eq!(parsed.render(&document(), false), want, "{template}");
        }
    }

    #[test]
    fn jsonpath_as_json_prints_each_paths_results_as_a_list() {
        let parsed = Template::parse("{.nodes[*].name}").expect("a template");
        assert_eq!(
            parsed.render(&document(), true),
            "[\n    \"n1\",\n    \"n2\"\n]\n"
        );
    }

    #[test]
    fn malformed_templates_are_refused_in_one_line() {
        for (template, want) in [
            ("{.pod", "unclosed action"),
            ("{range .nodes[*]}{.name}", "{range} without {end}"),
            ("{end}", "{end} without {range}"),
            ("{.nodes[}", ".nodes[}"),
            ("{\"\\q\"}", "unknown escape"),
            ("{}", "empty action"),
        ] {
            let err = Template::parse(template).expect_err(template).to_string();
            assert!(
                err.starts_with("error parsing jsonpath ") && err.contains(want) && !err.contains('\n'),
                "{template}: {err}"
            );
        }
    }

    #[test]
    fn names_are_kubectls_pod_slash_name_lines() {
        let doc = document();
        assert_eq!(names(&doc, NamedPods(&["/pod"])), "pod/web-1\n");
        assert_eq!(names(&doc, NamedPods(&["/victims"])), "pod/low-1\npod/low-2\n");
        assert_eq!(names(&doc, NamedPods(&["/nodes/*/name"])), "pod/n1\npod/n2\n");
        assert_eq!(names(&doc, NamedPods(&["/absent"])), "");
    }
}
