//! Replays the committed `admission_review` fuzz corpus (`fuzz/corpus/admission_review/`, see
//! CONTRIBUTING.md#fuzzing) through the function the fuzz target runs, with the same invariants: every
//! input the fuzzer kept, and every crash it found (kept in the corpus once fixed), is a regression
//! test on stable.

#[allow(dead_code)]
mod fuzz_harness;

use std::path::PathBuf;

#[test]
fn admission_review_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/admission_review");
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    let view = fuzz_harness::view();
    for file in files {
        let data = std::fs::read(&file).expect("corpus file reads");
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fuzz_harness::admission_review(&data, &view)
        }));
        assert!(
            result.is_ok(),
            "admission_review: {} breaks an invariant",
            file.display()
        );
    }
}

/// The harness's limit is what the server's body limit does: a body one byte over it is refused
/// before it is parsed (it is not even JSON here), one at the limit is parsed.
#[test]
fn oversized_bodies_are_refused_before_parsing() {
    use sched_webhook::admission::answer::answer;
    use sched_webhook::error::RequestError;
    let view = fuzz_harness::view();
    let limits = fuzz_harness::limits();
    let over = vec![b'x'; limits.max_body_bytes + 1];
    assert!(matches!(
        answer(&over, &view, &limits),
        Err(RequestError::TooLarge { .. })
    ));
    let at = vec![b'x'; limits.max_body_bytes];
    assert!(matches!(
        answer(&at, &view, &limits),
        Err(RequestError::Review(_))
    ));
}
