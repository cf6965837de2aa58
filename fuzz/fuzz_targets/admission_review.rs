//! Fuzz target `admission_review`: a request body answered by the pipeline `POST /mutate` runs
//! (`sched_webhook::admission::answer::answer`), with the I/O of no server, against a fixed cluster.
//! The input and its invariants are in webhook/tests/fuzz_harness, which webhook/tests/fuzz_corpus.rs
//! replays on stable (and checks against the router).
#![no_main]

use std::sync::LazyLock;

#[allow(dead_code)]
#[path = "../../webhook/tests/fuzz_harness/mod.rs"]
mod fuzz_harness;

static VIEW: LazyLock<sched_webhook::admission::StaticView> = LazyLock::new(fuzz_harness::view);

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_harness::admission_review(data, &VIEW));
