//! The guard against the parser: hand-picked cases, then generated documents (JSON, YAML flow
//! style, YAML block style with flow collections inside) whose depth, as yaml_serde parses them,
//! the guard must find exactly.

use super::*;

fn nested(depth: usize) -> String {
    "[".repeat(depth) + &"]".repeat(depth)
}

fn depth_of(text: &str) -> usize {
    flow_depth_at_most(text.as_bytes(), usize::MAX).expect("no limit")
}

#[test]
fn the_guard_refuses_deep_flow_nesting_and_accepts_what_kubernetes_writes() {
    let deep = nested(MAX_FLOW_DEPTH + 1);
    struct Case {
        name: &'static str,
        text: String,
        want: Result<(), TooDeep>,
    }
    let too_deep = |document, line, column| {
        Err(TooDeep {
            document,
            line,
            column,
        })
    };
    let cases = [
        Case {
            name: "at the limit",
            text: format!("data: {}\n", nested(MAX_FLOW_DEPTH)),
            want: Ok(()),
        },
        Case {
            name: "one past the limit",
            text: format!("data: {deep}\n"),
            want: too_deep(0, 1, 7 + MAX_FLOW_DEPTH),
        },
        Case {
            name: "mappings count as sequences do",
            text: format!("a: {}\n", "{a: ".repeat(MAX_FLOW_DEPTH + 1)),
            want: too_deep(0, 1, 4 + 4 * MAX_FLOW_DEPTH),
        },
        Case {
            // `[k: [k: ...` is `[{k: [{k: ...`: the parser counts two levels an opening bracket.
            name: "a pair in a flow sequence is a mapping level",
            text: format!("a: {}\n", "[k: ".repeat(MAX_FLOW_DEPTH / 2 + 1)),
            want: too_deep(0, 1, 4 + 4 * (MAX_FLOW_DEPTH / 2)),
        },
        Case {
            name: "wide is not deep",
            text: format!("a: [{}]\n", "[1], ".repeat(100_000)),
            want: Ok(()),
        },
        Case {
            name: "brackets in comments and scalars do not count",
            text: format!(
                "a: '{{\"b\": [[1]]}}'\nb: \"]] \\\" [[\"\nc: 1 # {}\nd: it's {} and [x]\n",
                "[".repeat(1_000),
                "]".repeat(10)
            ),
            want: Ok(()),
        },
        Case {
            name: "unmatched brackets inside a quoted scalar do not count",
            text: format!("a: '{}'\nb: \"{}\\\"\"\n", "[".repeat(1_000), "{".repeat(1_000)),
            want: Ok(()),
        },
        Case {
            name: "nor inside a block scalar, whatever its lines hold",
            text: format!(
                "a: |\n  {}\n  \"'\n\n   - [x\nb: >-\n  {}\n",
                "[".repeat(1_000),
                "{".repeat(1_000)
            ),
            want: Ok(()),
        },
        Case {
            name: "nor on a plain scalar's continuation line",
            text: format!("a: it's\n  {} 'x\nb: 1\n", "[".repeat(1_000)),
            want: Ok(()),
        },
        Case {
            name: "a line back at the block's indentation ends the block scalar",
            text: format!("a: |\n  x\n{}\n", "[".repeat(MAX_FLOW_DEPTH + 1)),
            want: too_deep(0, 3, MAX_FLOW_DEPTH + 1),
        },
        Case {
            name: "a closing bracket in a quoted scalar does not hide an opening one",
            text: format!("a: {}\n", "[ ']', ".repeat(MAX_FLOW_DEPTH + 1)),
            want: too_deep(0, 1, 4 + 7 * MAX_FLOW_DEPTH),
        },
        Case {
            name: "nor does a quote inside a plain scalar",
            text: format!("a: [it's, {}\n", "[".repeat(MAX_FLOW_DEPTH)),
            want: too_deep(0, 1, 11 + MAX_FLOW_DEPTH - 1),
        },
        Case {
            name: "nor a verbatim tag",
            text: format!("a: {}\n", "[!<x]> ".repeat(MAX_FLOW_DEPTH + 1)),
            want: too_deep(0, 1, 4 + 7 * MAX_FLOW_DEPTH),
        },
        Case {
            name: "nor a line break libyaml knows (NEL) ending a comment",
            text: format!("a: # x\u{85}{deep}\n"),
            want: too_deep(0, 2, 1 + MAX_FLOW_DEPTH),
        },
        Case {
            name: "nor a byte order mark where a line starts",
            text: format!("a:\n\u{feff}{deep}\n"),
            want: too_deep(0, 2, 4 + MAX_FLOW_DEPTH),
        },
        Case {
            name: "the document is counted from its --- line",
            text: format!("---\na: 1\n---\nb: {deep}\n"),
            want: too_deep(1, 4, 4 + MAX_FLOW_DEPTH),
        },
        Case {
            name: "a document before the first ---",
            text: format!("# c\na: 1\n---\nb: {deep}\n"),
            want: too_deep(1, 4, 4 + MAX_FLOW_DEPTH),
        },
    ];
    for c in cases {
        assert_eq!(check_flow_depth(c.text.as_bytes()), c.want, "{}", c.name);
    }
}

/// The report: JSON as kubectl prints it (escaped quotes in managedFields keys such as
/// `"k:{\"type\":\"Available\"}"`) made the old guard's readings drift ~10 levels an object, so a
/// List of 12 Deployments was refused. The depth found is the parsed one, however many objects.
#[test]
fn kubectl_json_read_as_yaml_has_its_real_depth() {
    let item = |i: usize| {
        serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": format!("web-{i}"),
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{\"x\":[\"a'b\"]}}\n"},
                "managedFields": [{"fieldsV1": {"f:status": {"f:conditions": {
                    ".": {},
                    "k:{\"type\":\"Available\"}": {".": {}, "f:status": {}},
                    "k:{\"type\":\"Progressing\"}": {".": {}, "f:message": {}}
                }}}}]
            },
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "args": ["it's", "[", "{"]}]}}}
        })
    };
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": (0..200).map(item).collect::<Vec<_>>()});
    for text in [
        serde_json::to_string(&list).unwrap(),
        serde_json::to_string_pretty(&list).unwrap(),
    ] {
        let parsed: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
        assert_eq!(depth_of(&text), value_depth(&parsed));
        assert_eq!(check_flow_depth(text.as_bytes()), Ok(()));
    }
    // A YAML stream of JSON documents, as `explain --from` reads one.
    let stream: String = (0..50)
        .map(|i| format!("---\n{}\n", serde_json::to_string_pretty(&item(i)).unwrap()))
        .collect();
    assert_eq!(depth_of(&stream), value_depth(&serde_json_to_yaml(&item(0))));
}

fn serde_json_to_yaml(value: &serde_json::Value) -> yaml_serde::Value {
    yaml_serde::from_str(&serde_json::to_string(value).unwrap()).unwrap()
}

/// Nesting depth of a parsed value (keys included, tags looked through).
fn value_depth(v: &yaml_serde::Value) -> usize {
    match v {
        yaml_serde::Value::Sequence(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        yaml_serde::Value::Mapping(m) => {
            1 + m
                .iter()
                .map(|(k, v)| value_depth(k).max(value_depth(v)))
                .max()
                .unwrap_or(0)
        }
        yaml_serde::Value::Tagged(t) => value_depth(&t.value),
        _ => 0,
    }
}

/// The deepest value written in flow style in a generated block document: the values of keys the
/// block writer named `flow_…` (it writes every other collection in block style).
fn flow_leaf_depth(v: &yaml_serde::Value) -> usize {
    match v {
        yaml_serde::Value::Sequence(items) => items.iter().map(flow_leaf_depth).max().unwrap_or(0),
        yaml_serde::Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| match k.as_str() {
                Some(key) if key.starts_with(FLOW_KEY) => value_depth(v),
                _ => flow_leaf_depth(v),
            })
            .max()
            .unwrap_or(0),
        yaml_serde::Value::Tagged(t) => flow_leaf_depth(&t.value),
        _ => 0,
    }
}

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Strings that hide brackets, quotes, escapes, comments and indicators from a naive count.
const NASTY: [&str; 24] = [
    "it's",
    "a\"b\"c",
    "x[y",
    "]z",
    "{a",
    "a: b",
    "# c",
    "'",
    "\"",
    "\\",
    "[[[",
    "}}}",
    "a,b",
    "- x",
    "? y",
    "é[ü",
    "tab\there",
    "line\nbreak ]",
    "",
    "null",
    "k:{\"type\":\"Ready\"}",
    "a #b [",
    "http://x/[y]",
    "\\\"[",
];

fn scalar(rng: &mut Rng) -> serde_json::Value {
    match rng.below(6) {
        0 => serde_json::Value::from(rng.below(1000)),
        1 => serde_json::Value::Bool(rng.chance(2)),
        2 => serde_json::Value::Null,
        _ => serde_json::Value::from(rng.pick(&NASTY)),
    }
}

/// A random JSON value: maps and sequences to `depth` levels, wide or narrow.
fn value(rng: &mut Rng, depth: usize) -> serde_json::Value {
    if depth == 0 || rng.chance(4) {
        return scalar(rng);
    }
    let width = rng.below(4);
    if rng.chance(2) {
        serde_json::Value::Array((0..width).map(|_| value(rng, depth - 1)).collect())
    } else {
        let mut map = serde_json::Map::new();
        for i in 0..width {
            let key = if rng.chance(3) {
                rng.pick(&NASTY).to_string()
            } else {
                format!("k{i}")
            };
            map.insert(key, value(rng, depth - 1));
        }
        serde_json::Value::Object(map)
    }
}

/// The prefix of keys whose value the block writer writes in flow style.
const FLOW_KEY: &str = "flow_";

/// Characters a plain scalar may not start with.
const INDICATORS: &str = "-?:,[]{}#&*!|>'\"%@`";

fn plain_ok(s: &str, flow: bool) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    !INDICATORS.contains(first)
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && !s.contains(['\n', '\t', '\\'])
        && s.trim() == s
        && !(flow && s.contains([',', '[', ']', '{', '}', ':']))
        && !matches!(s, "null" | "true" | "false")
        && s.parse::<f64>().is_err()
}

/// A string scalar in a random style the context allows (plain, single- or double-quoted).
fn write_string(rng: &mut Rng, s: &str, flow: bool, out: &mut String) {
    if plain_ok(s, flow) && rng.chance(2) {
        out.push_str(s);
    } else if !s.contains(['\n', '\t', '\\']) && rng.chance(2) {
        out.push('\'');
        out.push_str(&s.replace('\'', "''"));
        out.push('\'');
    } else {
        out.push_str(&serde_json::to_string(s).unwrap());
    }
}

fn write_scalar(rng: &mut Rng, v: &serde_json::Value, flow: bool, out: &mut String) {
    match v {
        serde_json::Value::String(s) => write_string(rng, s, flow, out),
        other => out.push_str(&other.to_string()),
    }
}

/// Space between flow tokens: nothing, a blank, or a line break with a comment full of brackets.
fn flow_gap(rng: &mut Rng, out: &mut String) {
    match rng.below(6) {
        0 => out.push_str(" # ]] ' \" {[\n   "),
        1 => out.push_str("\n  "),
        2 => out.push(' '),
        _ => {}
    }
}

/// `v` in YAML flow style, with anchors and tags sprinkled in (no aliases: a parsed alias repeats
/// its anchor's value, deeper than the text is).
fn write_flow(rng: &mut Rng, v: &serde_json::Value, out: &mut String) {
    if rng.chance(8) {
        out.push_str(rng.pick(&["&a1 ", "!t ", "!<x]}> ", "!<a,[b]> "]));
    }
    match v {
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                flow_gap(rng, out);
                write_flow(rng, item, out);
            }
            flow_gap(rng, out);
            out.push(']');
        }
        serde_json::Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                flow_gap(rng, out);
                write_string(rng, k, true, out);
                out.push_str(": ");
                write_flow(rng, item, out);
            }
            flow_gap(rng, out);
            out.push('}');
        }
        scalar => write_scalar(rng, scalar, true, out),
    }
}

/// A block scalar (`|`, `>-`, `|2`...) at `indent` whose lines are full of indicators.
fn write_block_scalar(rng: &mut Rng, indent: usize, out: &mut String) {
    let header = rng.pick(&["|", ">", "|-", ">+", "|2", "|1-"]);
    out.push_str(header);
    if rng.chance(3) {
        out.push_str(" # [[ {{");
    }
    out.push('\n');
    let pad = " ".repeat(indent);
    for _ in 0..1 + rng.below(3) {
        let line = rng.pick(&[
            "[[[ {{", "'", "\"x", "- [a", "k: [v", "# [", "  more [", "", "}}]]",
        ]);
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// A scalar as a block mapping's value or a block sequence's item, `indent` being where its
/// continuation lines go: any style, plain ones continued on lines full of brackets.
fn write_block_leaf(rng: &mut Rng, v: &serde_json::Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match rng.below(5) {
        0 => write_block_scalar(rng, indent, out),
        1 => {
            out.push_str("word");
            out.push('\n');
            out.push_str(&pad);
            out.push_str(rng.pick(&["[[ it's", "{x \"y", "]] a", "'['"]));
            out.push('\n');
        }
        2 => {
            write_scalar(rng, v, false, out);
            out.push_str(" # [[ ' \"\n");
        }
        _ => {
            write_scalar(rng, v, false, out);
            out.push('\n');
        }
    }
}

/// `v` in YAML block style at `indent`: collections in block style, except the values of some map
/// keys, renamed `flow_…`, which are written in flow style. `first` is what starts the first line
/// (`- ` of a sequence item) in place of the indentation.
fn write_block(rng: &mut Rng, v: &serde_json::Value, indent: usize, first: Option<&str>, out: &mut String) {
    let pad = " ".repeat(indent);
    let lead = |out: &mut String, i: usize| match (i, first) {
        (0, Some(first)) => out.push_str(first),
        _ => out.push_str(&pad),
    };
    let is_collection = |v: &serde_json::Value| match v {
        serde_json::Value::Array(a) => !a.is_empty(),
        serde_json::Value::Object(m) => !m.is_empty(),
        _ => false,
    };
    match v {
        serde_json::Value::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                lead(out, i);
                out.push_str("- ");
                if is_collection(item) {
                    write_block(rng, item, indent + 2, Some(""), out);
                } else {
                    write_block_leaf(rng, &block_scalar_of(item), indent + 2, out);
                }
            }
        }
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (i, (k, item)) in map.iter().enumerate() {
                lead(out, i);
                let flow = matches!(item, serde_json::Value::Array(_) | serde_json::Value::Object(_))
                    && (!is_collection(item) || rng.chance(2));
                if flow {
                    write_string(rng, &format!("{FLOW_KEY}{k}"), false, out);
                    out.push_str(": ");
                    write_flow(rng, item, out);
                    out.push_str(if rng.chance(3) { " # [[\n" } else { "\n" });
                } else if is_collection(item) {
                    write_string(rng, k, false, out);
                    out.push_str(":\n");
                    // Sequences under a key may be indentless, as kubectl writes them.
                    let deeper = if item.is_array() && rng.chance(2) {
                        indent
                    } else {
                        indent + 2
                    };
                    write_block(rng, item, deeper, None, out);
                } else {
                    write_string(rng, k, false, out);
                    out.push_str(": ");
                    write_block_leaf(rng, item, indent + 2, out);
                }
            }
        }
        scalar => {
            lead(out, 0);
            write_block_leaf(rng, &block_scalar_of(scalar), indent, out);
        }
    }
}

/// An empty collection becomes a scalar in block sequences (only a `flow_` key marks flow values).
fn block_scalar_of(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => serde_json::Value::from("empty"),
        other => other.clone(),
    }
}

/// The guard's depth equals the parser's on every generated document that parses: JSON (compact
/// and indented, alone and as a `---` stream), YAML flow style, and YAML block style with flow
/// values inside. Not a sample of the parser's behaviour but its own answer each time: a
/// proptest-style property with a seeded generator (proptest is not a dependency of the workspace).
#[test]
fn the_guard_finds_the_parsed_depth_of_generated_documents() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut json, mut flow, mut block) = (0, 0, 0);
    for round in 0..1_500 {
        let v = value(&mut rng, 1 + round % 9);
        let texts = [
            serde_json::to_string(&v).unwrap(),
            serde_json::to_string_pretty(&v).unwrap(),
            format!(
                "---\n{}\n---\n{}\n",
                serde_json::to_string(&v).unwrap(),
                serde_json::to_string_pretty(&v).unwrap()
            ),
        ];
        for text in texts {
            let parsed: Vec<yaml_serde::Value> = yaml_serde::Deserializer::from_str(&text)
                .map(|d| serde::Deserialize::deserialize(d).expect("JSON is YAML"))
                .collect();
            let want = parsed.iter().map(value_depth).max().unwrap_or(0);
            assert_eq!(depth_of(&text), want, "JSON {text:?}");
            json += 1;
        }

        let mut text = String::new();
        write_flow(&mut rng, &v, &mut text);
        text.push('\n');
        if let Ok(parsed) = yaml_serde::from_str::<yaml_serde::Value>(&text) {
            assert_eq!(depth_of(&text), value_depth(&parsed), "flow {text:?}");
            flow += 1;
        }

        let mut text = String::new();
        write_block(&mut rng, &v, 0, None, &mut text);
        if let Ok(parsed) = yaml_serde::from_str::<yaml_serde::Value>(&text) {
            assert_eq!(depth_of(&text), flow_leaf_depth(&parsed), "block {text:?}");
            block += 1;
        }
    }
    assert!(
        flow > 1_000 && block > 1_000,
        "too few generated documents parse: {json} JSON, {flow} flow, {block} block"
    );
}

/// Mutations of flow texts (every third character replaced by a delimiter in turn) that still
/// parse as a top-level flow sequence, every level of which is a flow level: the guard's depth is
/// the parsed depth, and it refuses exactly past the limit.
#[test]
fn mutated_flow_texts_keep_the_parsed_depth() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut checked = 0;
    for round in 0..150 {
        let mut text = String::from("[");
        let v = value(&mut rng, 1 + round % 7);
        write_flow(&mut rng, &v, &mut text);
        text.push(']');
        let mut variants = vec![text.clone()];
        for (i, _) in text.char_indices().step_by(3) {
            for d in ["]", "'", "\"", "#", " #", "!", "\\", ":", "\n"] {
                let mut v = text.clone();
                if v.is_char_boundary(i + 1) {
                    v.replace_range(i..i + 1, d);
                    variants.push(v);
                }
            }
        }
        for v in variants {
            let Ok(value @ yaml_serde::Value::Sequence(_)) = yaml_serde::from_str(&v) else {
                continue;
            };
            if !v.starts_with('[') {
                continue;
            }
            let d = value_depth(&value);
            assert_eq!(depth_of(&v), d, "{v:?}");
            assert!(flow_depth_at_most(v.as_bytes(), d).is_ok(), "{v:?}");
            assert!(flow_depth_at_most(v.as_bytes(), d - 1).is_err(), "{v:?}");
            checked += 1;
        }
    }
    assert!(checked > 1_000, "only {checked} texts parsed");
}

/// What the guard is for: yaml_serde accepts every text the guard accepts, or refuses it with its
/// own (cheap) recursion limit, never more slowly.
#[test]
fn texts_the_guard_accepts_parse_or_hit_the_parsers_own_limit() {
    for text in [
        format!("data: {}\n", nested(MAX_FLOW_DEPTH - 2)),
        format!("data: {}\n", nested(MAX_FLOW_DEPTH)),
    ] {
        assert!(check_flow_depth(text.as_bytes()).is_ok());
        if let Err(e) = yaml_serde::from_str::<yaml_serde::Value>(&text) {
            assert!(e.to_string().contains("recursion limit exceeded"), "{e}");
        }
    }
}

/// Linear whatever the input: a megabyte of each delimiter takes about as long as a megabyte of
/// plain text (a ratio, both measured in this run).
#[test]
fn the_guard_is_linear_on_any_input() {
    let size = 1 << 20;
    let time = |text: &[u8]| {
        let started = std::time::Instant::now();
        let _ = flow_depth_at_most(text, usize::MAX);
        started.elapsed()
    };
    let baseline = time(&b"a".repeat(size)).max(std::time::Duration::from_micros(100));
    for pattern in [
        &b"["[..],
        b"'",
        b"\"\\",
        b"- ",
        b"a:\n ",
        b"|\n  x\n",
        b"#\n",
        b"!<[",
        b"\xC2\x85",
    ] {
        let text: Vec<u8> = pattern.iter().copied().cycle().take(size).collect();
        let took = time(&text);
        assert!(
            took < baseline * 20,
            "{pattern:?}: {took:?} against {baseline:?} for plain text"
        );
    }
}
