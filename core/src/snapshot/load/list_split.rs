//! Splitting one JSON list response into batches of whole items while it is still arriving, so a
//! list the API server sends in one piece (no `limit`: served from its watch cache at about half the
//! cost of the same list in pages) is decoded as it streams in, batch by batch, instead of being held
//! whole. Each batch is a JSON list text (`{"items":[...]}`) that [`super::decode_list_page`] reads
//! like a page; what is left of the list without its items (`kind`, `metadata`, `"items":[]`) is the
//! envelope, read once the list has ended.
//!
//! The splitter only tracks JSON structure (strings, escapes, nesting); it does not validate values:
//! the decoder does that, and names the item and field of what it refuses.

/// What a list body must look like for the splitter, and was not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// An element of `items` was not a JSON object.
    #[error("item {index} of the list is not a JSON object")]
    ItemNotAnObject {
        /// Its position in the list.
        index: usize,
    },
    /// The body ended inside the list (the connection closed early).
    #[error("the list ended early, after {items} item(s): the response was cut short")]
    Truncated {
        /// Items read before the end.
        items: usize,
    },
    /// A batch or the envelope was not UTF-8.
    #[error("the list is not UTF-8 text")]
    NotUtf8,
}

const BATCH_OPEN: &[u8] = br#"{"items":["#;
const BATCH_CLOSE: &[u8] = b"]}";

/// Where the splitter is in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    /// Outside `items`: bytes go to the envelope.
    Envelope,
    /// After the top-level key `items` and its colon: its value starts next.
    ItemsValue,
    /// Inside the `items` array, between elements.
    BetweenItems,
    /// Inside an element of `items`: bytes go to the batch.
    Item,
}

/// Splits a JSON list arriving in chunks (see the module doc).
#[derive(Debug)]
pub struct ListSplitter {
    batch_bytes: usize,
    region: Region,
    /// Nesting depth of objects and arrays (the list itself is depth 1).
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The top-level string just read, when it could still be the key `items`.
    key: Vec<u8>,
    key_is_items: bool,
    envelope: Vec<u8>,
    batch: Vec<u8>,
    items_in_batch: usize,
    items: usize,
    ready: Vec<Vec<u8>>,
}

impl ListSplitter {
    /// A splitter that closes a batch once it holds `batch_bytes` bytes of items (at the next item
    /// boundary).
    pub fn new(batch_bytes: usize) -> Self {
        ListSplitter {
            batch_bytes: batch_bytes.max(1),
            region: Region::Envelope,
            depth: 0,
            in_string: false,
            escaped: false,
            key: Vec::new(),
            key_is_items: false,
            envelope: Vec::new(),
            batch: BATCH_OPEN.to_vec(),
            items_in_batch: 0,
            items: 0,
            ready: Vec::new(),
        }
    }

    /// Reads the next chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), SplitError> {
        let mut i = 0;
        while i < chunk.len() {
            if self.in_string {
                i = self.string_bytes(chunk, i);
                continue;
            }
            let b = chunk[i];
            match self.region {
                Region::Item => self.item_byte(b)?,
                Region::BetweenItems => self.between_items_byte(b)?,
                Region::ItemsValue => self.items_value_byte(b),
                Region::Envelope => self.envelope_byte(b),
            }
            i += 1;
        }
        Ok(())
    }

    /// The batches completed so far, each a JSON list text, in list order.
    pub fn take_batches(&mut self) -> Result<Vec<String>, SplitError> {
        std::mem::take(&mut self.ready)
            .into_iter()
            .map(|b| String::from_utf8(b).map_err(|_| SplitError::NotUtf8))
            .collect()
    }

    /// Ends the body: the last batches and the envelope (the list without its items' contents), or
    /// why the body was not a whole list.
    pub fn finish(mut self) -> Result<(Vec<String>, String), SplitError> {
        if self.depth != 0 || self.in_string || self.region != Region::Envelope || self.envelope.is_empty() {
            return Err(SplitError::Truncated { items: self.items });
        }
        if self.items_in_batch > 0 {
            self.close_batch();
        }
        let batches = self.take_batches()?;
        let envelope = String::from_utf8(self.envelope).map_err(|_| SplitError::NotUtf8)?;
        Ok((batches, envelope))
    }

    /// Bytes inside a string, from `start`: copied in one run up to the next quote or backslash.
    fn string_bytes(&mut self, chunk: &[u8], start: usize) -> usize {
        if self.escaped {
            self.escaped = false;
            self.copy(&chunk[start..start + 1]);
            return start + 1;
        }
        let Some(offset) = memchr::memchr2(b'"', b'\\', &chunk[start..]) else {
            self.copy(&chunk[start..]);
            return chunk.len();
        };
        let end = start + offset;
        self.copy(&chunk[start..=end]);
        if chunk[end] == b'\\' {
            self.escaped = true;
        } else {
            self.in_string = false;
            if self.region == Region::Envelope && self.depth == 1 {
                self.key_is_items = self.key == b"items\"";
            }
        }
        end + 1
    }

    /// Appends to where the current region's bytes go; records a top-level key as it is read.
    fn copy(&mut self, bytes: &[u8]) {
        match self.region {
            Region::Item => self.batch.extend_from_slice(bytes),
            _ => {
                self.envelope.extend_from_slice(bytes);
                if self.region == Region::Envelope && self.depth == 1 && self.key.len() < 8 {
                    self.key
                        .extend_from_slice(&bytes[..bytes.len().min(8 - self.key.len())]);
                }
            }
        }
    }

    fn envelope_byte(&mut self, b: u8) {
        self.envelope.push(b);
        match b {
            b'"' => {
                self.in_string = true;
                self.key.clear();
            }
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if self.depth == 1 && self.key_is_items => self.region = Region::ItemsValue,
            _ => {}
        }
        if !b.is_ascii_whitespace() && b != b'"' {
            self.key_is_items = false;
        }
    }

    /// The value of `items`: an array is split; anything else (`null`) stays in the envelope, where
    /// the decoder reads it.
    fn items_value_byte(&mut self, b: u8) {
        if b.is_ascii_whitespace() {
            self.envelope.push(b);
        } else if b == b'[' {
            self.envelope.push(b);
            self.depth += 1;
            self.region = Region::BetweenItems;
        } else {
            self.region = Region::Envelope;
            self.envelope_byte(b);
        }
    }

    fn between_items_byte(&mut self, b: u8) -> Result<(), SplitError> {
        match b {
            b',' => {}
            b']' => {
                self.envelope.push(b);
                self.depth -= 1;
                self.region = Region::Envelope;
            }
            b'{' => {
                if self.items_in_batch > 0 {
                    self.batch.push(b',');
                }
                self.batch.push(b);
                self.depth += 1;
                self.region = Region::Item;
            }
            b if b.is_ascii_whitespace() => {}
            _ => return Err(SplitError::ItemNotAnObject { index: self.items }),
        }
        Ok(())
    }

    fn item_byte(&mut self, b: u8) -> Result<(), SplitError> {
        self.batch.push(b);
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth -= 1;
                if self.depth == 2 {
                    self.items += 1;
                    self.items_in_batch += 1;
                    self.region = Region::BetweenItems;
                    if self.batch.len() >= self.batch_bytes {
                        self.close_batch();
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn close_batch(&mut self) {
        self.batch.extend_from_slice(BATCH_CLOSE);
        let full = std::mem::replace(&mut self.batch, BATCH_OPEN.to_vec());
        self.ready.push(full);
        self.items_in_batch = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7","note":"items: [\"x\"] {"},"items":[{"metadata":{"name":"a","labels":{"k":"}]\"\\"}}},{"metadata":{"name":"b"},"spec":{"a":[1,{"b":[]}]}} , {"metadata":{"name":"ü"}}]}"#;

    /// Splits `text` fed in chunks of `chunk` bytes.
    fn split(text: &str, chunk: usize, batch_bytes: usize) -> Result<(Vec<String>, String), SplitError> {
        let mut splitter = ListSplitter::new(batch_bytes);
        let mut batches = Vec::new();
        for part in text.as_bytes().chunks(chunk) {
            splitter.push(part)?;
            batches.extend(splitter.take_batches()?);
        }
        let (rest, envelope) = splitter.finish()?;
        batches.extend(rest);
        Ok((batches, envelope))
    }

    fn names(batches: &[String]) -> Vec<String> {
        batches
            .iter()
            .flat_map(|b| {
                let v: serde_json::Value = serde_json::from_str(b).expect("a batch is JSON");
                v["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn every_chunking_gives_the_same_items_and_envelope() {
        let whole: serde_json::Value = serde_json::from_str(LIST).unwrap();
        for chunk in [1, 2, 3, 7, 64, LIST.len()] {
            for batch_bytes in [1, 40, 1 << 20] {
                let (batches, envelope) = split(LIST, chunk, batch_bytes).unwrap();
                assert_eq!(
                    names(&batches),
                    ["a", "b", "ü"],
                    "chunk {chunk}, batch {batch_bytes}"
                );
                let batched: Vec<serde_json::Value> = batches
                    .iter()
                    .flat_map(|b| {
                        serde_json::from_str::<serde_json::Value>(b).unwrap()["items"]
                            .as_array()
                            .unwrap()
                            .clone()
                    })
                    .collect();
                assert_eq!(&batched, whole["items"].as_array().unwrap());
                let envelope: serde_json::Value = serde_json::from_str(&envelope).unwrap();
                assert_eq!(envelope["metadata"], whole["metadata"]);
                assert_eq!(envelope["items"], serde_json::json!([]));
            }
        }
    }

    #[test]
    fn batches_close_at_item_boundaries_once_full() {
        let (one_per_batch, _) = split(LIST, 5, 1).unwrap();
        assert_eq!(one_per_batch.len(), 3);
        let (all_in_one, _) = split(LIST, 5, 1 << 20).unwrap();
        assert_eq!(all_in_one.len(), 1);
    }

    #[test]
    fn lists_without_items_keep_them_in_the_envelope() {
        for text in [
            r#"{"kind":"PodList","metadata":{},"items":null}"#,
            r#"{"kind":"PodList","metadata":{}}"#,
            r#"{"kind":"PodList","items":[],"metadata":{"resourceVersion":"3"}}"#,
            r#"{"items" : [ ] }"#,
        ] {
            let (batches, envelope) = split(text, 3, 10).unwrap();
            assert!(batches.is_empty(), "{text}");
            let v: serde_json::Value = serde_json::from_str(&envelope).unwrap();
            let original: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(v, original, "{text}");
        }
    }

    #[test]
    fn a_key_named_items_below_the_top_is_not_split() {
        let text = r#"{"metadata":{"items":[{"a":1}]},"items":[{"metadata":{"name":"x"}}]}"#;
        let (batches, envelope) = split(text, 4, 1).unwrap();
        assert_eq!(names(&batches), ["x"]);
        let v: serde_json::Value = serde_json::from_str(&envelope).unwrap();
        assert_eq!(v["metadata"]["items"], serde_json::json!([{"a": 1}]));
    }

    #[test]
    fn cut_short_and_malformed_bodies_are_refused() {
        for cut in [1, 20, LIST.len() / 2, LIST.len() - 1] {
            assert!(
                matches!(split(&LIST[..cut], 7, 10), Err(SplitError::Truncated { .. })),
                "cut at {cut}"
            );
        }
        assert_eq!(
            split(r#"{"items":[{"a":1},2]}"#, 3, 10),
            Err(SplitError::ItemNotAnObject { index: 1 })
        );
        assert_eq!(split("", 3, 10), Err(SplitError::Truncated { items: 0 }));
        let mut splitter = ListSplitter::new(1);
        splitter.push(b"{\"items\":[{\"a\":\"\xff\"}").unwrap();
        assert_eq!(splitter.take_batches(), Err(SplitError::NotUtf8));
    }
}
