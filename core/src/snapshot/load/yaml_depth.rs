//! A linear-time guard against deeply nested YAML flow collections, run before the YAML parser.
//!
//! Why: yaml_serde refuses nesting past 128 levels, but only after libyaml has parsed the whole
//! document into events, and libyaml's scanner checks every pending simple key (one per open flow
//! collection, `[` or `{`) on every token, so its time grows with the square of the flow depth: 20,000
//! nested `[` took 2.2 s and 100,000 took 46 s in a debug build before the error came. Block nesting
//! (indentation) costs no such thing and is left to the parser's own limit.
//!
//! How: [`check_flow_depth`] bounds the flow depth libyaml would reach from above, in one pass over the
//! bytes, and refuses a text whose bound passes [`MAX_FLOW_DEPTH`]. It does not tokenize YAML: where
//! a byte could mean two things (a `'` that opens a quoted scalar or sits inside a plain one, `!` that
//! starts a tag or not, a `#` right after a flow indicator), it follows both readings and keeps, per
//! lexical state, the deepest nesting any reading reaches. Outside quotes, comments and tags every
//! `[` and `{` counts as an opening, so the bound is never below what libyaml reaches (the tests
//! check it against the depth yaml_serde parses); it can be above it only for text with more than
//! [`MAX_FLOW_DEPTH`] unmatched `[` or `{` inside scalars, which Kubernetes objects do not have.

/// The deepest flow nesting accepted: yaml_serde's own limit on all nesting (flow or block), so a
/// text this guard accepts is refused, if at all, by the parser's cheap check.
pub const MAX_FLOW_DEPTH: usize = 128;

/// A YAML text whose flow collections nest deeper than [`MAX_FLOW_DEPTH`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("flow collections ([ or {{) nested more than {MAX_FLOW_DEPTH} levels deep")]
pub struct TooDeep {
    /// The document (0-based, counting `---` lines), as the YAML readers number them.
    pub document: usize,
    /// 1-based line of the bracket that went past the limit.
    pub line: usize,
    /// 1-based column (in bytes) of that bracket.
    pub column: usize,
}

impl TooDeep {
    /// `document N: <what> at line L column C`, as the `-f` readers word yaml_serde's errors.
    pub fn with_position(&self) -> String {
        format!(
            "document {}: {self} at line {} column {}",
            self.document, self.line, self.column
        )
    }
}

/// The deepest nesting reached so far by any reading that is, at this byte, in each lexical state
/// (`None`: no reading is in that state).
#[derive(Debug, Clone, Copy, Default)]
struct Readings {
    /// Outside quoted scalars, comments and tags.
    plain: Option<usize>,
    /// In a single-quoted scalar (`''` is a closing and a reopening: the same thing here).
    single: Option<usize>,
    /// In a double-quoted scalar.
    double: Option<usize>,
    /// Right after a `\` in a double-quoted scalar.
    escape: Option<usize>,
    /// In a comment (a `#` after a blank or where a token may start), up to the end of the line.
    comment: Option<usize>,
    /// In a tag (`!…`), up to the next blank: a verbatim tag `!<…>` may hold brackets.
    tag: Option<usize>,
}

fn keep(slot: &mut Option<usize>, depth: usize) {
    *slot = Some(slot.map_or(depth, |d| d.max(depth)));
}

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl Readings {
    fn only_plain(&self) -> bool {
        self.single.is_none()
            && self.double.is_none()
            && self.escape.is_none()
            && self.comment.is_none()
            && self.tag.is_none()
    }

    /// The readings after byte `b`; `after_blank` when the byte before it is a blank or there is none.
    fn step(self, b: u8, after_blank: bool) -> Readings {
        let mut next = Readings::default();
        if let Some(d) = self.plain {
            match b {
                b'[' | b'{' => keep(&mut next.plain, d + 1),
                b']' | b'}' => keep(&mut next.plain, d.saturating_sub(1)),
                b'\'' => {
                    keep(&mut next.plain, d);
                    keep(&mut next.single, d);
                }
                b'"' => {
                    keep(&mut next.plain, d);
                    keep(&mut next.double, d);
                }
                b'!' => {
                    keep(&mut next.plain, d);
                    keep(&mut next.tag, d);
                }
                // libyaml starts a comment at a `#` after a blank wherever it is outside quotes (in a
                // block scalar's text it does not, but nothing nests there), and at one where a token
                // starts (`[#`, `,#`); elsewhere it is text (`a#b`).
                b'#' if after_blank => keep(&mut next.comment, d),
                b'#' => {
                    keep(&mut next.plain, d);
                    keep(&mut next.comment, d);
                }
                _ => keep(&mut next.plain, d),
            }
        }
        if let Some(d) = self.single {
            match b {
                b'\'' => keep(&mut next.plain, d),
                _ => keep(&mut next.single, d),
            }
        }
        if let Some(d) = self.double {
            match b {
                b'\\' => keep(&mut next.escape, d),
                b'"' => keep(&mut next.plain, d),
                _ => keep(&mut next.double, d),
            }
        }
        if let Some(d) = self.escape {
            keep(&mut next.double, d);
        }
        if let Some(d) = self.comment {
            match b {
                b'\n' | b'\r' => keep(&mut next.plain, d),
                _ => keep(&mut next.comment, d),
            }
        }
        if let Some(d) = self.tag {
            if is_blank(b) {
                keep(&mut next.plain, d);
            } else {
                keep(&mut next.tag, d);
            }
        }
        next
    }
}

/// True when `line` (without its line break) is a document start marker: `---` alone or followed by a
/// blank.
fn is_document_start(line: &[u8]) -> bool {
    line.starts_with(b"---") && line.get(3).is_none_or(|&b| is_blank(b))
}

/// Whether a line before the first `---` holds content (not blank, a comment or a directive): then
/// that first `---` starts the second document rather than the first.
fn is_content(line: &[u8]) -> bool {
    let text = line.trim_ascii_start();
    !(text.is_empty() || text.starts_with(b"#") || text.starts_with(b"%"))
}

/// Refuses `text` when its flow collections may nest deeper than [`MAX_FLOW_DEPTH`]; linear in its
/// length, whatever it holds.
pub fn check_flow_depth(text: &[u8]) -> Result<(), TooDeep> {
    check_flow_depth_at_most(text, MAX_FLOW_DEPTH)
}

/// [`check_flow_depth`] with another limit (the tests compare the bound with parsed depths).
fn check_flow_depth_at_most(text: &[u8], limit: usize) -> Result<(), TooDeep> {
    let mut readings = Readings {
        plain: Some(0),
        ..Readings::default()
    };
    let (mut line, mut line_start) = (1, 0);
    let (mut markers, mut content_before_marker) = (0, false);
    let mut after_blank = true;
    for (i, &b) in text.iter().enumerate() {
        if i == line_start {
            let rest = &text[i..];
            let this_line = &rest[..rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())];
            if is_document_start(this_line) {
                markers += 1;
            } else if markers == 0 && is_content(this_line) {
                content_before_marker = true;
            }
        }
        // Most bytes change nothing: only the plain reading is live and the byte is no delimiter.
        let inert = !matches!(b, b'[' | b']' | b'{' | b'}' | b'\'' | b'"' | b'!' | b'#');
        if !(inert && readings.only_plain()) {
            readings = readings.step(b, after_blank);
        }
        if readings.plain.is_some_and(|d| d > limit) {
            let first_marker_starts_the_first_document = markers > 0 && !content_before_marker;
            return Err(TooDeep {
                document: markers - usize::from(first_marker_starts_the_first_document),
                line,
                column: i - line_start + 1,
            });
        }
        after_blank = is_blank(b);
        if b == b'\n' {
            line += 1;
            line_start = i + 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        "[".repeat(depth) + &"]".repeat(depth)
    }

    #[test]
    fn the_bound_refuses_deep_flow_nesting_and_accepts_what_kubernetes_writes() {
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
                name: "wide is not deep",
                text: format!("a: [{}]\n", "[1], ".repeat(100_000)),
                want: Ok(()),
            },
            Case {
                name: "brackets in comments do not count, nor do matched ones in scalars",
                text: format!(
                    "a: '{{\"b\": [[1]]}}'\nb: \"]] \\\" [[\"\nc: 1 # {}\nd: it's {} and [x]\n",
                    "[".repeat(1_000),
                    "]".repeat(10)
                ),
                want: Ok(()),
            },
            Case {
                // The price of never counting too few: the bound is above libyaml's depth here.
                name: "unmatched brackets inside a scalar count",
                text: format!("a: '{}'\n", "[".repeat(MAX_FLOW_DEPTH + 1)),
                want: too_deep(0, 1, 5 + MAX_FLOW_DEPTH),
            },
            Case {
                name: "a closing bracket in a quoted scalar does not hide an opening one",
                text: format!("a: {}\n", "[ ']', ".repeat(MAX_FLOW_DEPTH + 1)),
                want: too_deep(0, 1, 4 + 7 * MAX_FLOW_DEPTH),
            },
            Case {
                name: "nor does a quote that opens nothing",
                text: format!("a: [it's, {}\n", "[".repeat(MAX_FLOW_DEPTH)),
                want: too_deep(0, 1, 11 + MAX_FLOW_DEPTH - 1),
            },
            Case {
                name: "nor a verbatim tag",
                text: format!("a: {}\n", "[!<x]> ".repeat(MAX_FLOW_DEPTH + 1)),
                want: too_deep(0, 1, 4 + 7 * MAX_FLOW_DEPTH),
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

    /// Nesting depth of a parsed value (keys included).
    fn depth(v: &yaml_serde::Value) -> usize {
        match v {
            yaml_serde::Value::Sequence(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
            yaml_serde::Value::Mapping(m) => {
                1 + m.iter().map(|(k, v)| depth(k).max(depth(v))).max().unwrap_or(0)
            }
            yaml_serde::Value::Tagged(t) => depth(&t.value),
            _ => 0,
        }
    }

    /// xorshift64: deterministic, no dependency.
    fn next(rng: &mut u64, n: usize) -> usize {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        (*rng % n as u64) as usize
    }

    /// A flow collection built from pieces that hide brackets and quotes from a naive count: quoted
    /// scalars with brackets and escapes, apostrophes in plain scalars, tags (verbatim ones with
    /// brackets), anchors, comments.
    fn flow(rng: &mut u64, budget: usize) -> String {
        const SCALARS: [&str; 9] = [
            "a",
            "it's",
            "'x]y'",
            "'a''b]}'",
            "\"q]\\\"]}\"",
            "!t a",
            "!<x]}> b",
            "&n c",
            "'[{'",
        ];
        let sequence = next(rng, 2) == 0;
        let mut parts = Vec::new();
        for i in 0..next(rng, 4) {
            let value = if budget > 0 && next(rng, 3) > 0 {
                flow(rng, budget - 1)
            } else {
                SCALARS[next(rng, SCALARS.len())].to_string()
            };
            parts.push(if sequence { value } else { format!("k{i}: {value}") });
        }
        let separator = if next(rng, 5) == 0 { ", # ]] ' \"\n " } else { ", " };
        let body = parts.join(separator);
        if sequence {
            format!("[{body}]")
        } else {
            format!("{{{body}}}")
        }
    }

    /// The bound is never below the depth the parser reaches: checked on generated flow texts and on
    /// mutations of them (every third byte replaced by a delimiter in turn), wherever the parser still
    /// reads a top-level flow sequence.
    #[test]
    fn the_bound_is_never_below_the_parsed_depth() {
        let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
        let mut checked = 0;
        for _ in 0..300 {
            // A top-level flow sequence: then every level the parser reaches is a flow level.
            let text = format!("[{}]", flow(&mut rng, 6));
            let mut variants = vec![text.clone()];
            for (i, _) in text.char_indices().step_by(3) {
                for d in ["]", "'", "\"", "#", " #", "!"] {
                    let mut v = text.clone();
                    if v.is_char_boundary(i) && v.is_char_boundary(i + 1) {
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
                let d = depth(&value);
                if d > 0 {
                    checked += 1;
                    assert!(
                        check_flow_depth_at_most(v.as_bytes(), d - 1).is_err(),
                        "bound below the parsed depth {d}: {v:?}"
                    );
                }
            }
        }
        assert!(checked > 1_000, "only {checked} texts parsed");
    }

    /// What the bound is for: yaml_serde accepts every text the guard accepts, or refuses it with its
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
}
