//! The layers of sched-core, sched-dra, sched-apimachinery, sched-webhook and the kubectl-sched
//! binary run one way, and the build says so: this test reads every production source file of a crate (the files `lib.rs` or `main.rs`
//! reaches through `mod` declarations that are not `#[cfg(test)]`), collects the crate-internal paths
//! each one names (`use crate::…`, `super::…`, `self::…`, `crate::…` inline, through `pub use`
//! re-exports to the file that defines the item), maps every file to a unit of the crate's table
//! ([`LAYERS`], [`DRA_LAYERS`], [`APIMACHINERY_LAYERS`], [`WEBHOOK_LAYERS`], [`CLI_LAYERS`]), and
//! fails listing
//!
//! - each import of a higher layer by a lower one, as `file:line`, and
//! - each cycle between units (a strongly connected component of the unit graph), with one
//!   `file:line` per edge of it.
//!
//! Test code is not production code: `#[cfg(test)]` items and the test builders
//! (`#[cfg(any(test, feature = "testing"))]`) are left out, so a test may reach across layers.
//!
//! It is a text scan rather than a parse (no syn dependency for one test): comments, string and char
//! literals are blanked first, so a path in a doc link or a message is not an import. `make lint`
//! runs it (`cargo test -p sched-core --test layers`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// A layer table: `(layer name, units)`, lowest layer first (see [`LAYERS`]).
type Layers = &'static [(&'static str, &'static [&'static str])];

/// The layers, lowest first: a unit may import its own layer and the layers before it, never a later
/// one; and no two units may import each other, even within a layer (through any chain). A unit is a
/// module path; a file belongs to the longest unit that is a prefix of its module path, and
/// `parent::*` makes each child module of `parent` a unit of its own (one per plugin). The order is
/// kube-scheduler's: the DRA library (`k8s.io/dynamic-resource-allocation`) below the cluster model
/// (its `backend/cache` snapshot), the framework's contracts and runtime (`framework/`, where
/// `FitError` lives too), the plugins' shared helpers and names, the preemption evaluator
/// (`framework/preemption`, which DefaultPreemption calls), the in-tree plugins
/// (`framework/plugins/*`), one scheduling cycle (`schedule_one.go`), and the tools built on them.
///
/// Below all of them are two crates of their own, which sched-core re-exports: sched-apimachinery
/// (`labels`, `resource`) and sched-dra (`dra::cel`, `dra::structured`). Cargo enforces their place:
/// neither depends on sched-core, so neither can name a module of it (a path through the
/// re-exports leads out of this crate and is no import here).
const LAYERS: Layers = &[
    // Values with no scheduling meaning of their own (quantities and selectors: sched-apimachinery).
    (
        "foundations",
        &["duration", "action", "api_error", "clock", "features"],
    ),
    // What the API server does to a pod before the scheduler sees it (defaulting, Priority admission,
    // the default scheduler name).
    ("admission", &["admission"]),
    // The DRA library (sched-dra: CEL for device selectors, the structured allocator and its inputs),
    // re-exported by `dra`.
    ("dra library", &["dra"]),
    // The cluster model: objects, NodeInfo/PodInfo, the readers of files and of a live cluster.
    ("snapshot", &["snapshot", "dra::templates"]),
    // The framework's contracts and runtime (status, cycle state, extension points, profiles, the
    // fit error) and the explanation a cycle returns.
    ("framework", &["framework", "explain"]),
    // What several plugins and preemption share: plugin names, scoring helpers, DeviceClasses.
    ("plugin helpers", &["plugins::names", "plugins::helper"]),
    // The preemption evaluator: candidates, victims, PDBs.
    ("preemption", &["preemption"]),
    // The in-tree plugins (each its own unit) and their registry.
    ("plugins", &["plugins", "plugins::*"]),
    // One scheduling cycle for one pod.
    ("schedule", &["schedule"]),
    // What users run: the engine, simulate, triage, and applying plans to a cluster.
    // The diagnosis layer (`diagnosis::*`: one explainer per plugin, the findings, the changes and the
    // hints checked by running the engine again) is a tool too; triage may build on it.
    (
        "tools",
        &[
            "engine",
            "simulate",
            "triage",
            "apply",
            "diagnosis::*",
            "node_pools",
        ],
    ),
    // The façades the binaries use instead of plugin internals: re-exports only, imported by nothing in
    // sched-core.
    ("façades", &["diagnosis", "volumes"]),
];

/// sched-webhook's layers, lowest first (the same rules as [`LAYERS`]). The request arrives at the
/// top and the decision is made near the bottom: pure decisions and the request pipeline know nothing
/// of the cache that feeds them (the cache implements their `ClusterView`), of the router that runs
/// them, or of the ports that serve the router.
const WEBHOOK_LAYERS: Layers = &[
    // Values and files with no webhook logic: the API server's deadline, the allocator's statistics,
    // the serving certificate and its files.
    ("foundations", &["deadline", "memory", "tls", "certs"]),
    // Pure decisions and the request pipeline, with its bounds (`Limits`) and its refusals
    // (`RequestError`).
    ("admission", &["admission"]),
    // The counters and the exposition helpers every collector writes with.
    ("metrics", &["metrics"]),
    // Records: what the reflectors and the controller's queue report into and the admin port reads;
    // they know neither side. The cache's pod trigger queue is one (the watchdog reads its lag), so it
    // is a unit of its own below the cache that holds it.
    ("records", &["watch_health", "watchdog", "cache::triggers"]),
    // The reflector caches: the cluster as the watches deliver it, plus the webhook's own writes.
    ("cache", &["cache"]),
    // Liveness and readiness: reads the cache and the records.
    ("health", &["health"]),
    // The controller: the same decisions, for stored pods.
    ("controller", &["controller"]),
    // The `POST /mutate` router: the pipeline with the server's I/O.
    ("router", &["mutate"]),
    // The listeners (TLS webhook port, admin port) that serve the router and the health endpoints.
    ("serving", &["serving"]),
    // The in-cluster explainer: its watch-fed snapshot, the aggregated API and its ports (it shares
    // the foundations, never the admission path).
    ("explainer", &["explainer"]),
    // What starts it all: the flags (which name every layer's defaults), the start-up errors, the
    // commands, and `server`, the one path naming the router and the listeners together.
    ("start", &["config", "error", "run", "server"]),
];

/// One crate-internal path a production file names.
#[derive(Debug, Clone)]
struct Import {
    /// The file that names it, relative to the crate root.
    file: String,
    /// 1-based line of the path.
    line: usize,
    /// The module the path leads to (after re-exports).
    target: String,
}

/// A production source file and its module path (`plugins::node_resources::fit`).
#[derive(Debug)]
struct SourceFile {
    module: String,
    path: PathBuf,
    /// The source with comments, literals and test-only items blanked (newlines kept).
    code: String,
    /// Non-test inline `mod name { … }` blocks: byte range and name.
    inline_mods: Vec<(usize, usize, String)>,
}

// === Blanking ===

/// Replaces comments, string/char literals and their contents by spaces, keeping newlines and byte
/// offsets.
fn blank_comments_and_literals(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    // One space per byte, so offsets into the blanked text are offsets into the source.
    let blank = |out: &mut String, c: char| {
        if c == '\n' {
            out.push('\n');
        } else {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    blank(&mut out, chars[i]);
                    blank(&mut out, chars[i + 1]);
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    blank(&mut out, chars[i]);
                    blank(&mut out, chars[i + 1]);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if let Some(len) = raw_string_prefix(&chars, i) {
            // r"…", r#"…"#, br#"…"#: no escapes; ends at a quote followed by as many hashes.
            let hashes = chars[i..i + len].iter().filter(|&&h| h == '#').count();
            for &p in &chars[i..i + len] {
                blank(&mut out, p);
            }
            i += len;
            while i < chars.len() {
                if chars[i] == '"' && (0..hashes).all(|k| chars.get(i + 1 + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        blank(&mut out, chars[i]);
                        i += 1;
                    }
                    break;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '"' || (c == 'b' && next == Some('"') && !ident_char_before(&chars, i)) {
            if c == 'b' {
                blank(&mut out, c);
                i += 1;
            }
            blank(&mut out, chars[i]);
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            if i < chars.len() {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a): only literals are blanked.
            let end = if next == Some('\\') {
                (i + 2..chars.len()).find(|&k| chars[k] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for &p in &chars[i..=end] {
                        blank(&mut out, p);
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The length of a raw string's opening (`r"`, `r#"`, `br##"`) at `i`, if one starts there.
fn raw_string_prefix(chars: &[char], i: usize) -> Option<usize> {
    if ident_char_before(chars, i) {
        return None;
    }
    let mut k = i;
    if chars.get(k) == Some(&'b') {
        k += 1;
    }
    if chars.get(k) != Some(&'r') {
        return None;
    }
    k += 1;
    while chars.get(k) == Some(&'#') {
        k += 1;
    }
    (chars.get(k) == Some(&'"')).then_some(k + 1 - i)
}

fn ident_char_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether an attribute's text (`cfg(test)`, `cfg(any(test, feature = "testing"))`) gates an item
/// to test builds or the test builders.
fn is_test_only_cfg(attr: &str) -> bool {
    let attr: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    attr == "cfg(test)"
        || attr.starts_with("cfg(all(test,")
        || (attr.starts_with("cfg(any(test,") && attr.contains("testing"))
}

/// Blanks every item carrying a test-only `#[cfg(…)]` (attribute and body). Runs on blanked code, so
/// braces in literals do not count. The feature name is read from the original text, since it is a
/// string literal (blanked in `code`).
fn blank_test_items(code: &str, original: &str) -> String {
    let bytes = code.as_bytes();
    let mut out = code.as_bytes().to_vec();
    let mut i = 0;
    while let Some(pos) = code[i..].find("#[cfg(") {
        let start = i + pos;
        let Some(attr_end) = matching(bytes, start + 1, b'[', b']') else {
            break;
        };
        if !is_test_only_cfg(&original[start + 2..attr_end]) {
            i = attr_end + 1;
            continue;
        }
        // Skip further attributes, then the item: up to a `;` at depth 0 or the first `{…}` block.
        let mut k = attr_end + 1;
        loop {
            while k < bytes.len() && bytes[k].is_ascii_whitespace() {
                k += 1;
            }
            if bytes.get(k) == Some(&b'#') && bytes.get(k + 1) == Some(&b'[') {
                k = matching(bytes, k + 1, b'[', b']').map_or(bytes.len(), |e| e + 1);
            } else {
                break;
            }
        }
        let mut end = bytes.len();
        while k < bytes.len() {
            match bytes[k] {
                b';' => {
                    end = k + 1;
                    break;
                }
                b'{' => {
                    end = matching(bytes, k, b'{', b'}').map_or(bytes.len(), |e| e + 1);
                    break;
                }
                _ => k += 1,
            }
        }
        for b in &mut out[start..end] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        i = end;
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced by spaces")
}

/// The index of the bracket closing the one at `open`.
fn matching(bytes: &[u8], open: usize, left: u8, right: u8) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &b) in bytes.iter().enumerate().skip(open) {
        if b == left {
            depth += 1;
        } else if b == right {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

// === Module tree ===

/// Keyword-delimited occurrences of `word` in blanked code.
fn find_keyword(code: &str, word: &str) -> Vec<usize> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(pos) = code[i..].find(word) {
        let at = i + pos;
        let end = at + word.len();
        let before_ok = at == 0 || !is_ident_byte(bytes[at - 1]) && bytes[at - 1] != b'$';
        let after_ok = end >= bytes.len() || !is_ident_byte(bytes[end]);
        if before_ok && after_ok {
            found.push(at);
        }
        i = end;
    }
    found
}

fn ident_at(code: &str, mut i: usize) -> (String, usize) {
    let bytes = code.as_bytes();
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    while i < bytes.len() && is_ident_byte(bytes[i]) {
        i += 1;
    }
    (code[start..i].to_string(), i)
}

/// Reads the crate's production files, starting at `lib.rs` and following `mod` declarations.
fn read_crate(src_dir: &Path) -> Vec<SourceFile> {
    read_crate_from(&src_dir.join("lib.rs"))
}

/// Reads a crate's production files, starting at its root file (`lib.rs`, or a binary's `main.rs`).
fn read_crate_from(root_file: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    let mut pending = vec![(String::new(), root_file.to_path_buf(), true)];
    while let Some((module, path, owns_dir)) = pending.pop() {
        let original =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let blanked = blank_comments_and_literals(&original);
        let code = blank_test_items(&blanked, &original);
        // Children of `a/mod.rs` and `lib.rs` live in `a/`; those of `a/b.rs` in `a/b/`.
        let child_dir = if owns_dir {
            path.parent().expect("a file has a directory").to_path_buf()
        } else {
            path.with_extension("")
        };
        let mut inline_mods = Vec::new();
        for at in find_keyword(&code, "mod") {
            let (name, after) = ident_at(&code, at + 3);
            let rest = code[after..].trim_start();
            let child = if module.is_empty() {
                name.clone()
            } else {
                format!("{module}::{name}")
            };
            if rest.starts_with(';') {
                let flat = child_dir.join(format!("{name}.rs"));
                let (file, owns) = if flat.exists() {
                    (flat, false)
                } else {
                    (child_dir.join(&name).join("mod.rs"), true)
                };
                pending.push((child, file, owns));
            } else if rest.starts_with('{') {
                let open = after + code[after..].find('{').expect("checked above");
                let close = matching(code.as_bytes(), open, b'{', b'}').unwrap_or(code.len());
                inline_mods.push((open, close, name));
            }
        }
        files.push(SourceFile {
            module,
            path,
            code,
            inline_mods,
        });
    }
    files.sort_by(|a, b| a.module.cmp(&b.module));
    files
}

// === Paths ===

/// Expands a `use` tree (`crate::{a::b, c::{d, e as f}}`) into its paths, each with the name it
/// binds (`f` for `e as f`, `*` for a glob).
fn expand_use_tree(tree: &str) -> Vec<(String, String)> {
    let mut paths = Vec::new();
    expand_into("", tree, &mut paths);
    paths
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<(String, String)>) {
    for part in split_top_level(tree) {
        if let Some(open) = part.find('{') {
            let head: String = part[..open].chars().filter(|c| !c.is_whitespace()).collect();
            let inner = &part[open + 1..part.rfind('}').unwrap_or(part.len())];
            expand_into(&join(prefix, head.trim_end_matches("::")), inner, out);
        } else {
            let mut words = part.split_whitespace();
            let path: String = words.next().unwrap_or_default().to_string();
            let alias = match (words.next(), words.next()) {
                (Some("as"), Some(alias)) => alias.to_string(),
                _ => path.rsplit("::").next().unwrap_or_default().to_string(),
            };
            let full = join(prefix, &path);
            let alias = if path == "self" {
                full.rsplit("::").next().unwrap_or_default().to_string()
            } else {
                alias
            };
            out.push((full, alias));
        }
    }
}

fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty() || rest == "self") {
        (true, _) => rest.to_string(),
        (false, true) => prefix.to_string(),
        (false, false) => format!("{prefix}::{rest}"),
    }
}

fn split_top_level(tree: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (k, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// The crate-absolute segments of a path named in module `module`, or None for an external path.
fn absolute(path: &str, module: &str, children: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut segments: Vec<String> = path.split("::").map(str::to_string).collect();
    let mut base: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    };
    match segments[0].as_str() {
        "crate" => {
            segments.remove(0);
            Some(segments)
        }
        "self" | "super" => {
            while let Some(first) = segments.first() {
                match first.as_str() {
                    "self" => {}
                    "super" => {
                        base.pop();
                    }
                    _ => break,
                }
                segments.remove(0);
            }
            base.extend(segments);
            Some(base)
        }
        // A child module named without `self::` (2018 paths).
        first => {
            let child = if module.is_empty() {
                first.to_string()
            } else {
                format!("{module}::{first}")
            };
            children.contains(&child).then(|| {
                base.extend(segments);
                base
            })
        }
    }
}

/// Public re-exports per module: item name → the absolute path it re-exports.
type ReExports = HashMap<String, HashMap<String, Vec<String>>>;

/// The module a crate-absolute path leads to: the longest module prefix, then through that module's
/// `pub use` of the next segment, if any.
fn resolve(segments: &[String], modules: &BTreeSet<String>, re_exports: &ReExports, depth: usize) -> String {
    let mut known = 0;
    for n in 1..=segments.len() {
        if modules.contains(&segments[..n].join("::")) {
            known = n;
        }
    }
    let module = segments[..known].join("::");
    if depth < 8
        && let Some(item) = segments.get(known)
        && let Some(target) = re_exports.get(&module).and_then(|m| m.get(item))
    {
        let mut next = target.clone();
        next.extend(segments[known + 1..].iter().cloned());
        return resolve(&next, modules, re_exports, depth + 1);
    }
    module
}

/// The module a byte offset of the file sits in (its inline `mod` blocks included).
fn module_at(file: &SourceFile, at: usize) -> String {
    match file
        .inline_mods
        .iter()
        .find(|(open, close, _)| (*open..*close).contains(&at))
    {
        Some((_, _, name)) if file.module.is_empty() => name.clone(),
        Some((_, _, name)) => format!("{}::{name}", file.module),
        None => file.module.clone(),
    }
}

/// Every `use` tree of a file with its offset, and the code with `use` items blanked.
fn use_items(code: &str) -> (Vec<(usize, String)>, String) {
    let mut rest = code.to_string();
    let mut items = Vec::new();
    for at in find_keyword(code, "use") {
        let Some(len) = code[at..].find(';') else { continue };
        items.push((at, code[at + 3..at + len].to_string()));
        rest.replace_range(at..at + len, &" ".repeat(len));
    }
    (items, rest)
}

/// Inline paths that start with `crate::`, `super::` or `self::`, with their offsets.
fn inline_paths(code: &str) -> Vec<(usize, String)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for head in ["crate", "super", "self"] {
        for at in find_keyword(code, head) {
            if !code[at + head.len()..].starts_with("::") {
                continue;
            }
            let mut end = at;
            while end < bytes.len() && (is_ident_byte(bytes[end]) || code[end..].starts_with("::")) {
                end += if bytes[end] == b':' { 2 } else { 1 };
            }
            found.push((at, code[at..end].trim_end_matches("::").to_string()));
        }
    }
    found
}

fn line_of(code: &str, at: usize) -> usize {
    code[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Every crate-internal path of every production file, resolved to the module it leads to.
fn imports(files: &[SourceFile], root: &Path) -> Vec<Import> {
    let modules: BTreeSet<String> = files
        .iter()
        .flat_map(|f| {
            let inline = f.inline_mods.iter().map(|(_, _, n)| format!("{}::{n}", f.module));
            std::iter::once(f.module.clone()).chain(inline)
        })
        .collect();
    let mut re_exports: ReExports = HashMap::new();
    for file in files {
        for (at, tree) in use_items(&file.code).0 {
            let before = file.code[..at].trim_end();
            if !["pub", "pub(crate)", "pub(super)"]
                .iter()
                .any(|v| before.ends_with(v))
            {
                continue;
            }
            let module = module_at(file, at);
            for (path, alias) in expand_use_tree(&tree) {
                let Some(abs) = absolute(&path, &module, &modules) else {
                    continue;
                };
                if alias != "*" {
                    re_exports.entry(module.clone()).or_default().insert(alias, abs);
                }
            }
        }
    }
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .path
            .strip_prefix(root)
            .unwrap_or(&file.path)
            .display()
            .to_string();
        let (uses, rest) = use_items(&file.code);
        let all = uses
            .into_iter()
            .flat_map(|(at, tree)| expand_use_tree(&tree).into_iter().map(move |(p, _)| (at, p)))
            .chain(inline_paths(&rest));
        for (at, path) in all {
            let module = module_at(file, at);
            let Some(abs) = absolute(&path, &module, &modules) else {
                continue;
            };
            let target = resolve(&abs, &modules, &re_exports, 0);
            found.push(Import {
                file: rel.clone(),
                line: line_of(&file.code, at),
                target,
            });
        }
    }
    found
}

// === Layers ===

/// The unit and layer index of a module, by the longest unit of [`LAYERS`] it falls in; the crate
/// root (`lib.rs`, the table of contents) has none.
fn unit_of(layers: Layers, module: &str) -> Option<(String, usize)> {
    let mut best: Option<(String, usize, usize)> = None;
    for (layer, (_, units)) in layers.iter().enumerate() {
        for &unit in *units {
            let found = match unit.strip_suffix("::*") {
                Some(parent) => module
                    .strip_prefix(parent)
                    .and_then(|rest| rest.strip_prefix("::"))
                    .and_then(|rest| rest.split("::").next())
                    .map(|child| (format!("{parent}::{child}"), parent.len() + 1)),
                None => (module == unit || module.starts_with(&format!("{unit}::")))
                    .then(|| (unit.to_string(), unit.len())),
            };
            if let Some((name, weight)) = found
                && best.as_ref().is_none_or(|(_, _, w)| weight > *w)
            {
                best = Some((name, layer, weight));
            }
        }
    }
    best.map(|(name, layer, _)| (name, layer))
}

/// What the check found.
#[derive(Debug, Default)]
struct Findings {
    /// Lower-layer files importing a higher layer.
    upward: Vec<String>,
    /// Cycles between units, each with its edges.
    cycles: Vec<String>,
    /// Files in no unit of the table (the table must name them).
    unplaced: Vec<String>,
}

fn check(files: &[SourceFile], root: &Path, layers: Layers) -> Findings {
    let mut findings = Findings::default();
    for file in files.iter().filter(|f| !f.module.is_empty()) {
        if unit_of(layers, &file.module).is_none() {
            findings
                .unplaced
                .push(format!("{} ({})", file.path.display(), file.module));
        }
    }
    let module_of: HashMap<String, &SourceFile> = files
        .iter()
        .map(|f| {
            (
                f.path.strip_prefix(root).unwrap_or(&f.path).display().to_string(),
                f,
            )
        })
        .collect();
    // unit → unit → first file:line naming it.
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for import in imports(files, root) {
        let from_module = &module_of[&import.file].module;
        let (Some((from, from_layer)), Some((to, to_layer))) =
            (unit_of(layers, from_module), unit_of(layers, &import.target))
        else {
            continue;
        };
        if from == to {
            continue;
        }
        let at = format!("{}:{}", import.file, import.line);
        if from_layer < to_layer {
            findings.upward.push(format!(
                "{at}: `{from}` ({}) imports `{}` ({})",
                layers[from_layer].0, import.target, layers[to_layer].0
            ));
        }
        edges.entry(from).or_default().entry(to).or_insert(at);
    }
    findings.upward.sort();
    findings.upward.dedup();
    for component in strongly_connected(&edges) {
        let members: BTreeSet<&str> = component.iter().copied().collect();
        let mut text = format!("cycle between {}:", component.join(", "));
        for from in &component {
            for (to, at) in edges.get(*from).into_iter().flatten() {
                if members.contains(to.as_str()) {
                    text.push_str(&format!("\n      {from} -> {to} ({at})"));
                }
            }
        }
        findings.cycles.push(text);
    }
    findings
}

/// Tarjan's algorithm; components of more than one unit, each sorted.
fn strongly_connected(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<&str>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: HashMap<&'a str, usize>,
        low: HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            let next: Vec<&'a str> = self
                .edges
                .get(v)
                .into_iter()
                .flat_map(|m| m.keys().map(String::as_str))
                .collect();
            for w in next {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.components.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(f, m)| std::iter::once(f.as_str()).chain(m.keys().map(String::as_str)))
        .collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.components
}

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn layers_run_one_way() {
    let root = crate_root();
    let files = read_crate(&root.join("src"));
    assert!(files.len() > 50, "read only {} files of sched-core", files.len());
    assert_one_way("sched-core", &files, &root, LAYERS);
}

/// sched-dra's layers, lowest first: the structured allocator compiles and evaluates selectors with
/// `cel`, and `cel` knows nothing of the allocator (upstream's `cel` package imports no `structured`).
const DRA_LAYERS: Layers = &[("cel", &["cel"]), ("structured", &["structured"])];

/// sched-apimachinery's modules: independent values, neither importing the other.
const APIMACHINERY_LAYERS: Layers = &[("values", &["labels", "resource"])];

#[test]
fn sched_dra_and_apimachinery_layers_run_one_way() {
    for (crate_name, dir, layers, at_least) in [
        ("sched-dra", "../dra", DRA_LAYERS, 20),
        ("sched-apimachinery", "../apimachinery", APIMACHINERY_LAYERS, 2),
    ] {
        let root = crate_root().join(dir);
        let files = read_crate(&root.join("src"));
        assert!(
            files.len() > at_least,
            "read only {} files of {crate_name}",
            files.len()
        );
        assert_one_way(crate_name, &files, &root, layers);
    }
}

#[test]
fn sched_webhook_layers_run_one_way() {
    let root = crate_root().join("../webhook");
    let files = read_crate(&root.join("src"));
    assert!(
        files.len() > 25,
        "read only {} files of sched-webhook",
        files.len()
    );
    assert_one_way("sched-webhook", &files, &root, WEBHOOK_LAYERS);
}

/// Fails listing every file of `files` in no unit of `layers`, every import of a higher layer by a
/// lower one, and every cycle between units.
fn assert_one_way(crate_name: &str, files: &[SourceFile], root: &Path, layers: Layers) {
    let findings = check(files, root, layers);
    let mut report = String::new();
    for (title, list) in [
        (
            "file(s) in no layer of its table (core/tests/layers.rs)",
            &findings.unplaced,
        ),
        ("import(s) of a higher layer by a lower one", &findings.upward),
        ("import cycle(s) between units", &findings.cycles),
    ] {
        if !list.is_empty() {
            report.push_str(&format!("{} {title}:\n", list.len()));
            for line in list {
                report.push_str(&format!("  {line}\n"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "{crate_name}'s layers do not run one way\n{report}"
    );
}

// === The check itself ===

/// Writes a crate of `(path, source)` files under a temporary directory and checks it.
fn check_sources(sources: &[(&str, &str)]) -> Findings {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, source) in sources {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create the directory");
        std::fs::write(&path, source).expect("write the source");
    }
    let files = read_crate(&dir.path().join("src"));
    check(&files, dir.path(), LAYERS)
}

#[test]
fn a_lower_layer_importing_a_higher_one_fails_and_test_code_does_not() {
    type Case<'a> = (&'a str, &'a str, &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (
            "use line",
            "use crate::engine::Engine;\n",
            &["src/clock.rs:1: `clock` (foundations) imports `engine` (tools)"],
        ),
        (
            "inline path",
            "fn f() {\n    crate::engine::run();\n}\n",
            &["src/clock.rs:2: `clock` (foundations) imports `engine` (tools)"],
        ),
        (
            "use tree",
            "use crate::{duration, engine::{self, Engine}};\n",
            &["src/clock.rs:1: `clock` (foundations) imports `engine` (tools)"],
        ),
        (
            "re-export followed",
            "use crate::Engine;\n",
            &["src/clock.rs:1: `clock` (foundations) imports `engine` (tools)"],
        ),
        (
            "cfg(test) module",
            "#[cfg(test)]\nmod tests {\n    use crate::engine::Engine;\n}\n",
            &[],
        ),
        (
            "cfg(test) item",
            "#[cfg(test)]\nuse crate::engine::Engine;\n",
            &[],
        ),
        (
            "comment and string",
            "// crate::engine::Engine\nconst S: &str = \"crate::engine::x\";\n",
            &[],
        ),
        ("downward", "use crate::duration::Duration;\n", &[]),
    ];
    for (name, clock, want) in cases {
        let findings = check_sources(&[
            (
                "src/lib.rs",
                "pub mod clock;\npub mod duration;\npub mod engine;\npub use engine::Engine;\n",
            ),
            ("src/duration.rs", "pub struct Duration;\n"),
            (
                "src/engine.rs",
                "use crate::clock;\npub struct Engine;\npub fn run() {}\n",
            ),
            ("src/clock.rs", clock),
        ]);
        assert_eq!(findings.upward, *want, "{name}");
        assert!(findings.unplaced.is_empty(), "{name}: {:?}", findings.unplaced);
    }
}

#[test]
fn a_cycle_within_a_layer_fails() {
    let findings = check_sources(&[
        ("src/lib.rs", "pub mod plugins;\n"),
        ("src/plugins/mod.rs", "pub mod a;\npub mod b;\n"),
        ("src/plugins/a.rs", "use super::b::B;\npub struct A;\n"),
        ("src/plugins/b.rs", "use crate::plugins::a::A;\npub struct B;\n"),
    ]);
    assert!(findings.upward.is_empty(), "{:?}", findings.upward);
    assert_eq!(
        findings.cycles,
        [
            "cycle between plugins::a, plugins::b:\n      plugins::a -> plugins::b (src/plugins/a.rs:1)\n      plugins::b -> plugins::a (src/plugins/b.rs:1)"
        ]
    );
}

#[test]
fn blanking_keeps_lifetimes_offsets_and_lines() {
    let src = "fn f<'a>(x: &'a str) -> char { 'é' } // crate::x\nlet s = r#\"crate::y\"#;";
    let blanked = blank_comments_and_literals(src);
    assert_eq!(blanked.len(), src.len());
    assert!(blanked.contains("<'a>") && blanked.contains("&'a str"));
    assert!(!blanked.contains("crate::") && !blanked.contains('é'));
    assert_eq!(blanked.lines().count(), 2);
}

/// kubectl-sched's layers, lowest first: the clap structs declare; where the cluster and the subject
/// come from (`source`: loading, the pods named, the release to evaluate with, what-if edits); the diagnosis built on
/// the engine's answers; the commands that resolve arguments into results; the renderers, one per
/// command; a command run on a snapshot handed in and rendered (`served`, for the in-cluster
/// explainer); the console that prints any command's result and errors. `lib.rs` (the library's root)
/// lists them; `main.rs` matches each subcommand to its run, renderer and exit code.
const CLI_LAYERS: Layers = &[
    ("declare", &["cli"]),
    ("sources", &["source::*", "source"]),
    ("diagnosis", &["diagnosis::*", "diagnosis"]),
    ("commands", &["commands::*", "commands"]),
    ("output", &["output::*", "output"]),
    // A command run on a cluster handed in (the in-cluster explainer's snapshot) and rendered.
    ("served", &["served"]),
    ("console", &["console"]),
];

#[test]
fn kubectl_sched_layers_run_one_way() {
    let root = crate_root().join("../kubectl-sched");
    let mut files = read_crate_from(&root.join("src/lib.rs"));
    files.extend(read_crate_from(&root.join("src/main.rs")));
    assert!(
        files.len() > 20,
        "read only {} files of kubectl-sched",
        files.len()
    );
    assert_one_way("kubectl-sched", &files, &root, CLI_LAYERS);
}
