//! The streaming JSON reader [`super::load_file_with`] tries first: a reader thread reads the file
//! chunk by chunk and a byte scanner splits it into list items (tracking only strings and nesting),
//! while the caller decodes the previous chunk's items in parallel; so a multi-gigabyte file never
//! sits in memory next to its objects. Anything it does not handle makes it give up ([`Fallback`]),
//! and the whole file is then read the exact way.

use std::io;
use std::path::Path;

use super::error::{Format, LoadReport};
use super::json::{ListEnvelope, RawItem, decode_json_pods, peek_json};
use super::kind::{ObjectKind, Resolved, resolve_kind};
use crate::snapshot::{ClusterObjects, PodDetail};

/// Bytes read per step. Items are decoded and the bytes dropped chunk by chunk, so a multi-gigabyte
/// file never sits in memory next to the objects decoded from it.
pub(super) const CHUNK: usize = 32 << 20;

/// Why the streaming reader gave up; the caller then reads the whole file the exact way, which also
/// yields a precise error when the file is at fault.
#[derive(Debug)]
pub(super) struct Fallback;

/// Where the scanner is in the current top-level object, at depth 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyState {
    ExpectKey,
    InKey,
    ExpectValue,
    InValue,
}

/// What a chunk yields.
enum Emitted {
    /// `items[item]` of `document`, as a byte range of the chunk.
    Item {
        document: usize,
        item: usize,
        range: std::ops::Range<usize>,
    },
    /// A whole top-level object that is not a List (owned: it may span chunks).
    Single { document: usize, text: Vec<u8> },
    /// A List document ended; its envelope (everything but the items) for its recorded version.
    ListEnd { header: Vec<u8> },
}

/// Splits a stream of JSON objects into list items without decoding them, tracking only strings
/// and nesting. Everything of a document but its `items` array is kept in `header`.
struct Scanner {
    depth: u32,
    in_string: bool,
    escape: bool,
    key_state: KeyState,
    key: Vec<u8>,
    in_items: bool,
    saw_items: bool,
    header: Vec<u8>,
    document: usize,
    item: usize,
    /// Bytes of a leading UTF-8 byte order mark seen so far (3 once past the start).
    bom: usize,
}

const BOM: &[u8] = "\u{feff}".as_bytes();

impl Scanner {
    fn new() -> Self {
        Scanner {
            depth: 0,
            in_string: false,
            escape: false,
            key_state: KeyState::ExpectKey,
            key: Vec::new(),
            in_items: false,
            saw_items: false,
            header: Vec::new(),
            document: 0,
            item: 0,
            bom: 0,
        }
    }

    /// Scans `buf`; returns what it found and how many leading bytes may be dropped (all of them,
    /// or up to the start of an item that continues past the end of `buf`).
    fn scan(&mut self, buf: &[u8], out: &mut Vec<Emitted>) -> Result<usize, Fallback> {
        let mut pos = 0;
        while pos < buf.len() {
            if self.in_items && self.depth == 2 {
                // Between items.
                match buf[pos] {
                    b' ' | b'\n' | b'\r' | b'\t' | b',' => pos += 1,
                    b'{' => match scan_object(buf, pos) {
                        Some(end) => {
                            out.push(Emitted::Item {
                                document: self.document,
                                item: self.item,
                                range: pos..end,
                            });
                            self.item += 1;
                            pos = end;
                        }
                        None => return Ok(pos),
                    },
                    b']' => {
                        self.in_items = false;
                        self.depth = 1;
                        self.header.push(b']');
                        self.key_state = KeyState::InValue;
                        pos += 1;
                    }
                    _ => return Err(Fallback),
                }
                continue;
            }
            let b = buf[pos];
            pos += 1;
            if self.depth == 0 {
                if self.bom < BOM.len() {
                    if b == BOM[self.bom] {
                        self.bom += 1;
                        continue;
                    }
                    self.bom = BOM.len();
                }
                match b {
                    b' ' | b'\n' | b'\r' | b'\t' => continue,
                    b'{' => {
                        self.depth = 1;
                        self.header.clear();
                        self.header.push(b'{');
                        self.key_state = KeyState::ExpectKey;
                        self.saw_items = false;
                        self.item = 0;
                        continue;
                    }
                    _ => return Err(Fallback),
                }
            }
            self.header.push(b);
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                    if self.key_state == KeyState::InKey {
                        // An escaped key is never `items`.
                        self.key.push(0);
                    }
                } else if b == b'"' {
                    self.in_string = false;
                    if self.depth == 1 && self.key_state == KeyState::InKey {
                        self.key_state = KeyState::ExpectValue;
                    }
                } else if self.depth == 1 && self.key_state == KeyState::InKey {
                    self.key.push(b);
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 && self.key_state == KeyState::ExpectKey {
                        self.key_state = KeyState::InKey;
                        self.key.clear();
                    }
                }
                b',' if self.depth == 1 => self.key_state = KeyState::ExpectKey,
                b'[' if self.depth == 1
                    && self.key_state == KeyState::ExpectValue
                    && self.key == b"items" =>
                {
                    self.in_items = true;
                    self.saw_items = true;
                    self.depth = 2;
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.end_document(out);
                    }
                }
                _ => {}
            }
        }
        Ok(buf.len())
    }

    fn end_document(&mut self, out: &mut Vec<Emitted>) {
        if self.saw_items {
            out.push(Emitted::ListEnd {
                header: std::mem::take(&mut self.header),
            });
        } else {
            out.push(Emitted::Single {
                document: self.document,
                text: std::mem::take(&mut self.header),
            });
        }
        self.document += 1;
    }

    fn finished(&self) -> bool {
        self.depth == 0 && !self.in_string
    }
}

/// The end (exclusive) of the object starting at `buf[start] == b'{'`, or `None` if it continues
/// past the end of `buf`. Only quotes and braces matter for finding the closing brace, so the scan
/// jumps between them; whether the object is valid JSON is for the decoder to say.
fn scan_object(buf: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0u32;
    let mut pos = start;
    loop {
        pos += memchr::memchr3(b'"', b'{', b'}', buf.get(pos..)?)?;
        match buf[pos] {
            b'"' => {
                // Jump to the closing quote, skipping escaped characters.
                pos += 1;
                loop {
                    let i = memchr::memchr2(b'"', b'\\', buf.get(pos..)?)?;
                    if buf[pos + i] == b'\\' {
                        pos += i + 2;
                    } else {
                        pos += i + 1;
                        break;
                    }
                }
                continue;
            }
            b'{' => depth += 1,
            _ => {
                depth -= 1;
                if depth == 0 {
                    return Some(pos + 1);
                }
            }
        }
        pos += 1;
    }
}

/// One scanned chunk: its bytes and what was found in them.
type Scanned = Result<(Vec<u8>, Vec<Emitted>), Fallback>;

/// Reads a JSON file chunk by chunk, decoding list items as they are found. A reader thread reads
/// and splits the next chunk while this one decodes the previous one in parallel.
pub(super) fn stream_json_file(
    path: &Path,
    chunk: usize,
    detail: &PodDetail,
) -> Result<(ClusterObjects, LoadReport), Fallback> {
    let file = std::fs::File::open(path).map_err(|_| Fallback)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Scanned>(1);
    let (spare_tx, spare_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| {
        scope.spawn(move || read_and_scan(file, chunk, &tx, &spare_rx));
        let mut report = LoadReport::new(Format::Json);
        let mut objects = ClusterObjects::default();
        for scanned in rx {
            let (buf, emitted) = scanned?;
            decode_emitted(&buf, &emitted, detail, &mut objects, &mut report)?;
            // The reader fills it again: reusing buffers spares the kernel mapping and zeroing fresh
            // pages for every chunk (a quarter of the CPU time of a large load when it did).
            let _ = spare_tx.send(buf);
        }
        report.objects = objects.len();
        Ok((objects, report))
    })
}

/// The reader thread: sends each chunk with the items that end in it; the start of an item that
/// continues past a chunk is carried over to the next one. Buffers the decoder is done with come back
/// through `spare`. Stops when the receiver hangs up.
fn read_and_scan(
    file: std::fs::File,
    chunk: usize,
    tx: &std::sync::mpsc::SyncSender<Scanned>,
    spare: &std::sync::mpsc::Receiver<Vec<u8>>,
) {
    use std::io::Read;
    let mut scanner = Scanner::new();
    let mut file = file;
    let mut buf: Vec<u8> = Vec::with_capacity(chunk);
    loop {
        let mut eof = false;
        while buf.len() < buf.capacity() {
            let want = (buf.capacity() - buf.len()) as u64;
            match (&mut file).take(want).read_to_end(&mut buf) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    let _ = tx.send(Err(Fallback));
                    return;
                }
            }
        }
        let mut emitted = Vec::new();
        let consumed = match scanner.scan(&buf, &mut emitted) {
            Ok(c) => c,
            Err(f) => {
                let _ = tx.send(Err(f));
                return;
            }
        };
        let tail = &buf[consumed..];
        if eof {
            let complete = scanner.finished() && tail.iter().all(u8::is_ascii_whitespace);
            let last = if complete {
                Ok((buf, emitted))
            } else {
                Err(Fallback)
            };
            let _ = tx.send(last);
            return;
        }
        // A single item larger than the buffer makes the next one twice as large.
        let capacity = if consumed == 0 {
            buf.capacity() * 2
        } else {
            chunk.max(tail.len() * 2)
        };
        let mut next = spare
            .try_recv()
            .ok()
            .filter(|b| b.capacity() >= capacity)
            .unwrap_or_else(|| Vec::with_capacity(capacity));
        next.clear();
        next.extend_from_slice(tail);
        buf.truncate(consumed);
        if tx.send(Ok((buf, emitted))).is_err() {
            return;
        }
        buf = next;
    }
}

fn decode_emitted(
    buf: &[u8],
    emitted: &[Emitted],
    detail: &PodDetail,
    objects: &mut ClusterObjects,
    report: &mut LoadReport,
) -> Result<(), Fallback> {
    let mut buckets: Vec<Vec<RawItem<'_>>> = vec![Vec::new(); ObjectKind::ALL.len()];
    for e in emitted {
        let (document, item, text) = match e {
            Emitted::Item {
                document,
                item,
                range,
            } => (*document, Some(*item), &buf[range.clone()]),
            Emitted::Single { document, text } => (*document, None, text.as_slice()),
            Emitted::ListEnd { header } => {
                report.documents += 1;
                let envelope: ListEnvelope = serde_json::from_slice(header).map_err(|_| Fallback)?;
                report.record_version(envelope.kube_version());
                continue;
            }
        };
        if item.is_none() {
            report.documents += 1;
        }
        let text = std::str::from_utf8(text).map_err(|_| Fallback)?;
        let peek = peek_json(text).map_err(|_| Fallback)?;
        match resolve_kind(peek.api_version.as_deref(), peek.kind.as_deref(), None) {
            Resolved::Known(k) => buckets[k.index()].push(RawItem {
                document,
                item,
                text,
                kind: k,
            }),
            Resolved::Skip => report.skip(peek.api_version.as_deref(), peek.kind.as_deref().unwrap_or("")),
            // Typed lists name the item kind in the list, possibly after the items: read exactly.
            Resolved::NoKind => return Err(Fallback),
        }
    }
    for kind in ObjectKind::ALL {
        let items = &buckets[kind.index()];
        if items.is_empty() {
            continue;
        }
        if *kind == ObjectKind::Pod && *detail != PodDetail::Full {
            decode_json_pods(items, detail, objects).map_err(|_| Fallback)?;
        } else {
            kind.decode_json(items, objects).map_err(|_| Fallback)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::load::tests::{JSON_LIST, JSON_POD_LIST, JSON_STREAM, assert_same};
    use crate::snapshot::load::{load_bytes, load_file};
    use crate::testing::generate::GenerateParams;

    #[test]
    fn streaming_matches_reading_whole_files_at_any_chunk_size() {
        let dir = tempfile::tempdir().unwrap();
        let generated = dir.path().join("gen.json");
        crate::testing::generate::write_json_list(&GenerateParams::new(5, 60, 2, 9), &generated).unwrap();
        let mut files = vec![generated];
        for (i, text) in [
            JSON_LIST,
            JSON_STREAM,
            "\u{feff}{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"a\\\"{\"}}",
        ]
        .iter()
        .enumerate()
        {
            let path = dir.path().join(format!("{i}.json"));
            std::fs::write(&path, text).unwrap();
            files.push(path);
        }
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let (want, want_report) = load_bytes(&bytes, path).unwrap();
            for chunk in [1, 2, 7, 64, 1000, CHUNK] {
                let (got, report) = stream_json_file(path, chunk, &PodDetail::Full)
                    .unwrap_or_else(|_| panic!("{} at chunk {chunk}: fell back", path.display()));
                assert_same(&got, &want);
                assert_eq!(report, want_report, "{} at chunk {chunk}", path.display());
            }
        }
    }

    #[test]
    fn streaming_falls_back_to_exact_errors_and_typed_lists() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("typed list", JSON_POD_LIST, true),
            (
                "truncated",
                "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"kind\": \"Pod\"",
                false,
            ),
            (
                "bad field",
                "{\"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"spec\": 5}]}",
                false,
            ),
            (
                "top-level array",
                "[{\"apiVersion\": \"v1\", \"kind\": \"Pod\"}]",
                false,
            ),
        ];
        for (name, text, loads) in cases {
            let path = dir.path().join("f.json");
            std::fs::write(&path, text).unwrap();
            assert!(
                stream_json_file(&path, 16, &PodDetail::Full).is_err(),
                "{name}: streaming declines"
            );
            let exact = load_bytes(text.as_bytes(), &path).map(|(o, _)| o.len());
            let via_file = load_file(&path).map(|(o, _)| o.len());
            assert_eq!(via_file.is_ok(), loads, "{name}");
            assert_eq!(
                via_file.map_err(|e| e.to_string()),
                exact.map_err(|e| e.to_string()),
                "{name}: same result as reading the whole file"
            );
        }
    }
}
