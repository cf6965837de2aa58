//! A linear-time guard against deeply nested YAML flow collections, run before the YAML parser.
//!
//! Why: yaml_serde refuses nesting past 128 levels, but only after libyaml has parsed the whole
//! document into events, and libyaml's scanner checks every pending simple key (one per open flow
//! collection, `[` or `{`) on every token, so its time grows with the square of the flow depth: 20,000
//! nested `[` took 2.2 s and 100,000 took 46 s in a debug build before the error came. Block nesting
//! (indentation) costs no such thing and is left to the parser's own limit.
//!
//! How: [`check_flow_depth`] runs the part of libyaml's scanner (`scanner.c`, as libyaml-rs 0.3
//! transpiles it; yaml_serde's parser) that decides where tokens start and end, and counts the
//! nesting of flow collections as the parser does: `[` and `{` open a level only where a token
//! starts, never inside a quoted
//! scalar (`'…'` with `''`, `"…"` with its escapes), a plain scalar (`it's`, `a[b`, and in block
//! context its continuation lines), a block scalar (`|`, `>`: every line indented past its parent), a
//! comment, a tag (`!<a[b]>`), an anchor or a directive. Knowing where a block scalar ends and where a
//! plain one continues takes the block indentation, so the scanner keeps libyaml's indentation
//! stack and the simple key of flow level 0 (a `key:` rolls the indentation to the key's column).
//! A `key: value` entry of a flow sequence is a mapping of one pair to the parser (`[a: [b]]` nests
//! three levels), so it counts one level too.
//!
//! It does not report libyaml's errors: where libyaml would stop with one (a tab in indentation, an
//! unknown escape), it goes on reading, so up to the first error it reaches exactly the flow levels
//! libyaml reaches, and past it libyaml reads nothing more. The tests check that the depth it finds
//! equals the depth yaml_serde parses, on generated documents in flow and block style and JSON.

/// The deepest flow nesting accepted: yaml_serde's own limit on all nesting (flow or block), so a
/// text this guard accepts is refused, if at all, by the parser's cheap check.
pub const MAX_FLOW_DEPTH: usize = 128;

/// How far (in bytes) a simple key may run before its `:` in libyaml (`yaml_parser_stale_simple_keys`).
const SIMPLE_KEY_REACH: usize = 1024;

/// The UTF-8 byte order mark, which libyaml skips at the start of the stream and of any line.
const BOM: &[u8] = b"\xEF\xBB\xBF";

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

/// Refuses `text` when its flow collections nest deeper than [`MAX_FLOW_DEPTH`]; linear in its
/// length, whatever it holds.
pub fn check_flow_depth(text: &[u8]) -> Result<(), TooDeep> {
    flow_depth_at_most(text, MAX_FLOW_DEPTH).map(drop)
}

/// The deepest flow nesting libyaml reaches in `text`, or where it first passes `limit`.
fn flow_depth_at_most(text: &[u8], limit: usize) -> Result<usize, TooDeep> {
    Scanner::new(text, limit).run()
}

/// A position as libyaml marks it: the line, and the column in characters.
#[derive(Debug, Clone, Copy)]
struct Mark {
    /// Byte offset (libyaml's `index`, which counts UTF-8 bytes).
    index: usize,
    /// 0-based line.
    line: usize,
    /// 0-based column, in characters.
    column: usize,
}

/// An open flow collection, and the nesting the parser counts in it.
#[derive(Debug, Clone, Copy)]
struct FlowLevel {
    /// `[` rather than `{`.
    sequence: bool,
    /// Its nesting depth as the parser counts it (1 for the outermost).
    depth: usize,
    /// In a sequence: the current entry is a single-pair mapping (`[a: 1]` is `[{a: 1}]`).
    pair: bool,
    /// The deepest nesting inside the current entry so far.
    entry_deepest: usize,
    /// The deepest nesting inside it so far, itself included.
    deepest: usize,
}

/// The state of libyaml's scanner that decides where tokens start and end.
struct Scanner<'t> {
    text: &'t [u8],
    limit: usize,
    /// The next byte to read.
    pos: usize,
    /// Where libyaml's `index` 0 is (after a leading byte order mark, which its reader drops).
    origin: usize,
    line: usize,
    column: usize,
    /// Byte offset of the current line's start (for the byte column of [`TooDeep`]).
    line_start: usize,
    /// The open flow collections, innermost last.
    levels: Vec<FlowLevel>,
    deepest: usize,
    /// The block indentation column (-1 before any block collection) and the enclosing ones.
    indent: isize,
    indents: Vec<isize>,
    simple_key_allowed: bool,
    /// The possible simple key of flow level 0 (where a `key:` starts); deeper levels' keys never
    /// move the indentation, so they are not kept.
    block_key: Option<Mark>,
    /// Documents started so far, and whether one is open (content after `...` starts another).
    documents: usize,
    in_document: bool,
}

fn is_blank(b: Option<u8>) -> bool {
    matches!(b, Some(b' ' | b'\t'))
}

/// libyaml's `IS_ALPHA`: anchor and tag handle characters.
fn is_alpha(b: Option<u8>) -> bool {
    matches!(b, Some(b'0'..=b'9' | b'A'..=b'Z' | b'a'..=b'z' | b'_' | b'-'))
}

/// A character of a tag's URI (`yaml_parser_scan_tag_uri`); `,`, `[` and `]` only in a verbatim tag.
fn is_uri_char(b: Option<u8>, verbatim: bool) -> bool {
    is_alpha(b)
        || matches!(
            b,
            Some(
                b';' | b'/'
                    | b'?'
                    | b':'
                    | b'@'
                    | b'&'
                    | b'='
                    | b'+'
                    | b'$'
                    | b'.'
                    | b'%'
                    | b'!'
                    | b'~'
                    | b'*'
                    | b'\''
                    | b'('
                    | b')'
            )
        )
        || (verbatim && matches!(b, Some(b',' | b'[' | b']')))
}

/// Bytes of the UTF-8 character led by `b` (1 for a stray continuation byte, so reading advances).
fn char_width(b: u8) -> usize {
    match b {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

impl<'t> Scanner<'t> {
    fn new(text: &'t [u8], limit: usize) -> Self {
        let origin = if text.starts_with(BOM) { BOM.len() } else { 0 };
        Scanner {
            text,
            limit,
            pos: origin,
            origin,
            line: 0,
            column: 0,
            line_start: origin,
            levels: Vec::new(),
            deepest: 0,
            indent: -1,
            indents: Vec::new(),
            simple_key_allowed: true,
            block_key: None,
            documents: 0,
            in_document: false,
        }
    }

    // === reading characters ===

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.text.get(self.pos + k).copied()
    }

    fn peek(&self) -> Option<u8> {
        self.peek_at(0)
    }

    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    /// Bytes of the line break at `pos + k` (`\r\n` counts as one break), 0 when there is none:
    /// libyaml's `IS_BREAK` also knows NEL, LS and PS.
    fn break_width_at(&self, k: usize) -> usize {
        let rest = self.text.get(self.pos + k..).unwrap_or_default();
        match rest {
            [b'\r', b'\n', ..] => 2,
            [b'\r' | b'\n', ..] => 1,
            [0xC2, 0x85, ..] => 2,
            [0xE2, 0x80, 0xA8 | 0xA9, ..] => 3,
            _ => 0,
        }
    }

    fn is_break_at(&self, k: usize) -> bool {
        self.break_width_at(k) > 0
    }

    fn is_break(&self) -> bool {
        self.is_break_at(0)
    }

    /// libyaml's `IS_BLANKZ`: a blank, a line break or the end.
    fn is_blankz_at(&self, k: usize) -> bool {
        self.pos + k >= self.text.len() || is_blank(self.peek_at(k)) || self.is_break_at(k)
    }

    /// `---` or `...` at the start of a line, followed by a blank, a break or the end.
    fn at_document_indicator(&self) -> bool {
        let rest = &self.text[self.pos.min(self.text.len())..];
        self.column == 0 && (rest.starts_with(b"---") || rest.starts_with(b"...")) && self.is_blankz_at(3)
    }

    /// libyaml's `SKIP`: one character.
    fn skip(&mut self) {
        if let Some(b) = self.peek() {
            self.pos = (self.pos + char_width(b)).min(self.text.len());
            self.column += 1;
        }
    }

    /// libyaml's `SKIP_LINE`: one line break, if there is one.
    fn skip_line(&mut self) {
        let width = self.break_width_at(0);
        if width > 0 {
            self.pos += width;
            self.line += 1;
            self.column = 0;
            self.line_start = self.pos;
        }
    }

    fn skip_to_break(&mut self) {
        while !(self.at_end() || self.is_break()) {
            self.skip();
        }
    }

    fn mark(&self) -> Mark {
        Mark {
            index: self.pos - self.origin,
            line: self.line,
            column: self.column,
        }
    }

    // === libyaml's bookkeeping: simple keys, indentation, flow levels ===

    fn save_simple_key(&mut self) {
        if self.simple_key_allowed && self.levels.is_empty() {
            self.block_key = Some(self.mark());
        }
    }

    fn remove_simple_key(&mut self) {
        if self.levels.is_empty() {
            self.block_key = None;
        }
    }

    /// A key stops being possible once the line ends or it runs past [`SIMPLE_KEY_REACH`].
    fn stale_simple_keys(&mut self) {
        let here = self.mark();
        if self
            .block_key
            .is_some_and(|key| key.line < here.line || key.index + SIMPLE_KEY_REACH < here.index)
        {
            self.block_key = None;
        }
    }

    fn roll_indent(&mut self, column: usize) {
        let column = column as isize;
        if self.levels.is_empty() && self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
        }
    }

    fn unroll_indent(&mut self, column: isize) {
        if !self.levels.is_empty() {
            return;
        }
        while self.indent > column {
            self.indent = self.indents.pop().unwrap_or(-1);
        }
    }

    fn content_token(&mut self) {
        if !self.in_document {
            self.documents += 1;
            self.in_document = true;
        }
    }

    fn too_deep(&self, depth: usize) -> Result<(), TooDeep> {
        if depth > self.limit {
            return Err(TooDeep {
                document: self.documents.saturating_sub(1),
                line: self.line + 1,
                column: self.pos - self.line_start + 1,
            });
        }
        Ok(())
    }

    /// `[` or `{`: one level deeper than its parent, two in a flow sequence entry that is a pair.
    fn open_flow_collection(&mut self, sequence: bool) -> Result<(), TooDeep> {
        let depth = self
            .levels
            .last()
            .map_or(1, |p| p.depth + 1 + usize::from(p.sequence && p.pair));
        self.levels.push(FlowLevel {
            sequence,
            depth,
            pair: false,
            entry_deepest: 0,
            deepest: depth,
        });
        self.deepest = self.deepest.max(depth);
        self.too_deep(depth)
    }

    fn close_flow_collection(&mut self) {
        if let Some(closed) = self.levels.pop()
            && let Some(parent) = self.levels.last_mut()
        {
            parent.entry_deepest = parent.entry_deepest.max(closed.deepest);
            parent.deepest = parent.deepest.max(closed.deepest);
        }
    }

    /// `,`: a flow sequence's next entry is not a pair until its own `:` or `?`.
    fn next_flow_entry(&mut self) {
        if let Some(level) = self.levels.last_mut() {
            level.pair = false;
            level.entry_deepest = 0;
        }
    }

    /// `:` or `?` directly in a flow sequence: the entry is a single-pair mapping, one level the
    /// parser counts with no bracket, below which the key's collections sink by one.
    fn flow_pair(&mut self) -> Result<(), TooDeep> {
        let Some(level) = self.levels.last_mut() else {
            return Ok(());
        };
        if !level.sequence || level.pair {
            return Ok(());
        }
        level.pair = true;
        let depth = (level.depth + 1).max(level.entry_deepest + 1);
        level.deepest = level.deepest.max(depth);
        self.deepest = self.deepest.max(depth);
        self.too_deep(depth)
    }

    // === tokens ===

    fn run(mut self) -> Result<usize, TooDeep> {
        loop {
            self.scan_to_next_token();
            self.stale_simple_keys();
            self.unroll_indent(self.column as isize);
            if self.at_end() {
                return Ok(self.deepest);
            }
            self.fetch_token()?;
        }
    }

    /// `yaml_parser_scan_to_next_token`: blanks, comments and line breaks. libyaml refuses a tab
    /// where a block token may start; that is an error, after which nothing counts, so tabs are
    /// skipped everywhere here.
    fn scan_to_next_token(&mut self) {
        loop {
            if self.column == 0 && self.text[self.pos.min(self.text.len())..].starts_with(BOM) {
                self.skip();
            }
            while is_blank(self.peek()) {
                self.skip();
            }
            if self.peek() == Some(b'#') {
                self.skip_to_break();
            }
            if !self.is_break() {
                return;
            }
            self.skip_line();
            if self.levels.is_empty() {
                self.simple_key_allowed = true;
            }
        }
    }

    /// `yaml_parser_fetch_next_token`, from the token's first character.
    fn fetch_token(&mut self) -> Result<(), TooDeep> {
        let c = self.peek();
        let block = self.levels.is_empty();
        if self.column == 0 && c == Some(b'%') {
            // A directive: up to and including its line break.
            self.unroll_indent(-1);
            self.remove_simple_key();
            self.simple_key_allowed = false;
            self.skip_to_break();
            self.skip_line();
            return Ok(());
        }
        if self.at_document_indicator() {
            self.unroll_indent(-1);
            self.remove_simple_key();
            self.simple_key_allowed = false;
            if c == Some(b'-') {
                self.documents += 1;
                self.in_document = true;
            } else {
                self.in_document = false;
            }
            (0..3).for_each(|_| self.skip());
            return Ok(());
        }
        self.content_token();
        match c {
            Some(b'[' | b'{') => {
                self.save_simple_key();
                self.open_flow_collection(c == Some(b'['))?;
                self.simple_key_allowed = true;
                self.skip();
            }
            Some(b']' | b'}') => {
                self.remove_simple_key();
                self.close_flow_collection();
                self.simple_key_allowed = false;
                self.skip();
            }
            Some(b',') => {
                self.remove_simple_key();
                self.next_flow_entry();
                self.simple_key_allowed = true;
                self.skip();
            }
            Some(b'-') if self.is_blankz_at(1) => {
                self.roll_indent(self.column);
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.skip();
            }
            Some(b'?') if !block || self.is_blankz_at(1) => {
                self.flow_pair()?;
                self.roll_indent(self.column);
                self.remove_simple_key();
                self.simple_key_allowed = block;
                self.skip();
            }
            Some(b':') if !block || self.is_blankz_at(1) => {
                self.flow_pair()?;
                // In flow context the key is the flow level's own, which moves no indentation.
                let block_key = if block { self.block_key.take() } else { None };
                match block_key {
                    Some(key) => {
                        self.roll_indent(key.column);
                        self.simple_key_allowed = false;
                    }
                    None => {
                        self.roll_indent(self.column);
                        self.simple_key_allowed = block;
                    }
                }
                self.skip();
            }
            Some(b'*' | b'&') => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.skip();
                while is_alpha(self.peek()) {
                    self.skip();
                }
            }
            Some(b'!') => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.scan_tag();
            }
            Some(b'|' | b'>') if block => {
                self.remove_simple_key();
                self.simple_key_allowed = true;
                self.scan_block_scalar();
            }
            Some(quote @ (b'\'' | b'"')) => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.scan_quoted_scalar(quote);
            }
            _ if self.starts_plain_scalar() => {
                self.save_simple_key();
                self.simple_key_allowed = false;
                self.scan_plain_scalar();
            }
            // A character no token starts with: libyaml stops here.
            _ => self.skip(),
        }
        Ok(())
    }

    /// Whether a plain scalar starts here (the other indicators were tried first).
    fn starts_plain_scalar(&self) -> bool {
        let c = self.peek();
        let indicator = self.is_blankz_at(0)
            || matches!(
                c,
                Some(
                    b'-' | b'?'
                        | b':'
                        | b','
                        | b'['
                        | b']'
                        | b'{'
                        | b'}'
                        | b'#'
                        | b'&'
                        | b'*'
                        | b'!'
                        | b'|'
                        | b'>'
                        | b'\''
                        | b'"'
                        | b'%'
                        | b'@'
                        | b'`'
                )
            );
        !indicator
            || (c == Some(b'-') && !is_blank(self.peek_at(1)))
            || (self.levels.is_empty() && matches!(c, Some(b'?' | b':')) && !self.is_blankz_at(1))
    }

    /// `yaml_parser_scan_tag`: `!<uri>` (where brackets may appear) or `!handle!suffix`.
    fn scan_tag(&mut self) {
        let verbatim = self.peek_at(1) == Some(b'<');
        self.skip();
        if verbatim {
            self.skip();
        }
        while is_uri_char(self.peek(), verbatim) {
            self.skip();
        }
        if verbatim && self.peek() == Some(b'>') {
            self.skip();
        }
    }

    /// `yaml_parser_scan_flow_scalar`: up to the closing quote.
    fn scan_quoted_scalar(&mut self, quote: u8) {
        let single = quote == b'\'';
        self.skip();
        loop {
            if self.at_document_indicator() || self.at_end() {
                return; // an error in libyaml
            }
            while !self.is_blankz_at(0) {
                let c = self.peek();
                if single && c == Some(b'\'') && self.peek_at(1) == Some(b'\'') {
                    self.skip();
                    self.skip();
                } else if c == Some(quote) {
                    break;
                } else if !single && c == Some(b'\\') && self.is_break_at(1) {
                    self.skip();
                    self.skip_line();
                    break;
                } else if !single && c == Some(b'\\') {
                    let digits = match self.peek_at(1) {
                        Some(b'x') => 2,
                        Some(b'u') => 4,
                        Some(b'U') => 8,
                        Some(
                            b'0' | b'a' | b'b' | b't' | b'\t' | b'n' | b'v' | b'f' | b'r' | b'e' | b' '
                            | b'"' | b'/' | b'\\' | b'N' | b'_' | b'L' | b'P',
                        ) => 0,
                        _ => return, // an unknown escape: an error in libyaml
                    };
                    self.skip();
                    self.skip();
                    for _ in 0..digits {
                        if !self.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
                            return; // an error in libyaml
                        }
                        self.skip();
                    }
                } else {
                    self.skip();
                }
            }
            if self.peek() == Some(quote) {
                self.skip();
                return;
            }
            while is_blank(self.peek()) || self.is_break() {
                if self.is_break() {
                    self.skip_line();
                } else {
                    self.skip();
                }
            }
        }
    }

    /// `yaml_parser_scan_plain_scalar`: up to `: `, ` #`, a flow indicator in flow context, or in
    /// block context a line indented no deeper than the enclosing block.
    fn scan_plain_scalar(&mut self) {
        let indent = self.indent + 1;
        let flow = !self.levels.is_empty();
        let mut leading_blanks = false;
        loop {
            if self.at_document_indicator() || self.peek() == Some(b'#') {
                break;
            }
            while !self.is_blankz_at(0) {
                let c = self.peek();
                let flow_indicator = |b: Option<u8>| matches!(b, Some(b',' | b'[' | b']' | b'{' | b'}'));
                // `:` before `,?[]{}` in flow context is an error in libyaml: ending here is as good.
                if (c == Some(b':')
                    && (self.is_blankz_at(1)
                        || (flow && (flow_indicator(self.peek_at(1)) || self.peek_at(1) == Some(b'?')))))
                    || (flow && flow_indicator(c))
                {
                    break;
                }
                leading_blanks = false;
                self.skip();
            }
            if !(is_blank(self.peek()) || self.is_break()) {
                break;
            }
            while is_blank(self.peek()) || self.is_break() {
                if self.is_break() {
                    self.skip_line();
                    leading_blanks = true;
                } else {
                    self.skip();
                }
            }
            if !flow && (self.column as isize) < indent {
                break;
            }
        }
        if leading_blanks {
            self.simple_key_allowed = true;
        }
    }

    /// `yaml_parser_scan_block_scalar`: the header (`|+2 # comment`), then every line indented at
    /// least as far as the first one with text (or as the indentation indicator says).
    fn scan_block_scalar(&mut self) {
        self.skip();
        let digit = |b: Option<u8>| b.filter(u8::is_ascii_digit).map(|d| isize::from(d - b'0'));
        let mut increment = 0;
        if matches!(self.peek(), Some(b'+' | b'-')) {
            self.skip();
            if let Some(d) = digit(self.peek()) {
                increment = d;
                self.skip();
            }
        } else if let Some(d) = digit(self.peek()) {
            increment = d;
            self.skip();
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.skip();
            }
        }
        while is_blank(self.peek()) {
            self.skip();
        }
        if self.peek() == Some(b'#') {
            self.skip_to_break();
        }
        if !self.is_blankz_at(0) {
            return; // an error in libyaml
        }
        self.skip_line();
        let mut indent = match increment {
            0 => 0,
            n if self.indent >= 0 => self.indent + n,
            n => n,
        };
        self.block_scalar_breaks(&mut indent);
        while self.column as isize == indent && !self.at_end() {
            self.skip_to_break();
            self.skip_line();
            self.block_scalar_breaks(&mut indent);
        }
    }

    /// `yaml_parser_scan_block_scalar_breaks`: indentation and empty lines; an `indent` of 0 is
    /// decided here (the deepest of these lines, at least one past the enclosing block).
    fn block_scalar_breaks(&mut self, indent: &mut isize) {
        let mut deepest = 0;
        loop {
            while (*indent == 0 || (self.column as isize) < *indent) && self.peek() == Some(b' ') {
                self.skip();
            }
            deepest = deepest.max(self.column as isize);
            if !self.is_break() {
                break;
            }
            self.skip_line();
        }
        if *indent == 0 {
            *indent = deepest.max(self.indent + 1).max(1);
        }
    }
}

#[cfg(test)]
mod tests;
