//! Fuzz target `list_split`: the input and its invariants are in core/tests/fuzz_harness (`list_split`), which
//! core/tests/fuzz_corpus.rs replays on stable.
#![no_main]

#[allow(dead_code)]
#[path = "../../core/tests/fuzz_harness/mod.rs"]
mod fuzz_harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_harness::list_split(data));
