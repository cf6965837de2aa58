//! Fuzz target `admission_review`: a request body answered as `POST /mutate` answers it, against a
//! fixed cluster. The input and its invariants are in webhook/tests/fuzz_harness, which
//! webhook/tests/fuzz_corpus.rs replays on stable.
#![no_main]

use std::sync::LazyLock;

#[allow(dead_code)]
#[path = "../../webhook/tests/fuzz_harness/mod.rs"]
mod fuzz_harness;

static VIEW: LazyLock<sched_webhook::admission::StaticView> = LazyLock::new(fuzz_harness::view);

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_harness::admission_review(data, &VIEW));
