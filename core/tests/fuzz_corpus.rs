//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`, see CONTRIBUTING.md#fuzzing) through
//! the functions the fuzz targets run, with the same invariants: every input the fuzzer kept, and
//! every crash it found (kept in the corpus once fixed), is a regression test on stable.

#[allow(dead_code)]
mod fuzz_harness;

use std::path::PathBuf;

fn corpus_files(target: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
}

fn replay(target: &str) {
    for file in corpus_files(target) {
        let data = std::fs::read(&file).expect("corpus file reads");
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fuzz_harness::run(target, &data)));
        assert!(result.is_ok(), "{target}: {} breaks an invariant", file.display());
    }
}

#[test]
fn snapshot_load_corpus() {
    replay("snapshot_load");
}

#[test]
fn scheduler_config_corpus() {
    replay("scheduler_config");
}

#[test]
fn quantity_corpus() {
    replay("quantity");
}

#[test]
fn label_selector_corpus() {
    replay("label_selector");
}

#[test]
fn list_split_corpus() {
    replay("list_split");
}
