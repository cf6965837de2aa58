#!/usr/bin/env bash
# Runs the cargo-fuzz targets one after another (what `make fuzz` runs; not part of `make test`).
#
#   fuzz/run.sh [target...]      default: every target
#
# Environment:
#   FUZZ_SECONDS   seconds per target (default 300)
#   FUZZ_FLAGS     cargo-fuzz build flags (default "--sanitizer none --debug-assertions": the
#                  workspace forbids unsafe code, so AddressSanitizer mostly costs time; debug
#                  assertions turn on overflow checks, which tests have and release builds do not)
#   CARGO          cargo command (default cargo; the toolchain is +nightly)
#
# Each target runs on its committed corpus (fuzz/corpus/<target>, read only) with new inputs written
# to fuzz/corpus-work/<target>; the two are then merged and minimized (`cargo fuzz cmin`) back into
# fuzz/corpus/<target>, which stays small enough to commit (core/tests/fuzz_corpus.rs and
# webhook/tests/fuzz_corpus.rs replay it on stable). A crash stops the run: its input is in
# fuzz/artifacts/<target>/, and the command to reproduce it is printed.
set -euo pipefail

cd "$(dirname "$0")"
CARGO=${CARGO:-cargo}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-300}
read -r -a FLAGS <<<"${FUZZ_FLAGS:---sanitizer none --debug-assertions}"
ALL=(admission_review snapshot_load scheduler_config quantity label_selector list_split)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
MAX_FILES=300

if ! "$CARGO" +nightly --version >/dev/null 2>&1; then
  echo "fuzz: needs a nightly toolchain: rustup toolchain install nightly" >&2
  exit 1
fi
if ! "$CARGO" +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: needs cargo-fuzz: cargo install cargo-fuzz" >&2
  exit 1
fi

# Only admission_review needs the webhook feature (and the kube client stack it brings); the core
# targets build without it, so a short run of them does not wait for that build.
for target in "${TARGETS[@]}"; do
  [ "$target" != admission_review ] || FLAGS+=(--features webhook)
done

# Without the feature cargo skips admission_review (required-features) and builds the rest.
"$CARGO" +nightly fuzz build "${FLAGS[@]}"

for target in "${TARGETS[@]}"; do
  work="corpus-work/$target"
  mkdir -p "$work" "corpus/$target"
  seeds=()
  # Snapshot seeds also come from the examples, as they change.
  [ "$target" != snapshot_load ] || seeds+=(../examples)
  echo "== $target: ${SECONDS_PER_TARGET}s"
  if ! "$CARGO" +nightly fuzz run "${FLAGS[@]}" "$target" "$work" "corpus/$target" "${seeds[@]}" -- \
      -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 \
      2>"corpus-work/$target.log"; then
    tail -40 "corpus-work/$target.log" >&2
    echo "fuzz: $target crashed; reproduce with:" >&2
    echo "  cd fuzz && $CARGO +nightly fuzz run ${FLAGS[*]} $target <the artifact above>" >&2
    exit 1
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "corpus-work/$target.log" || true
  merged=$(mktemp -d)
  cp -n "corpus/$target"/* "$work"/* "$merged"/ 2>/dev/null || true
  "$CARGO" +nightly fuzz cmin "${FLAGS[@]}" "$target" "$merged" 2>>"corpus-work/$target.log"
  rm -rf "corpus/$target"
  mkdir -p "corpus/$target"
  # The committed corpus stays small: the smallest MAX_FILES inputs of the minimized set.
  ls -S -r "$merged" | head -n "$MAX_FILES" | while read -r f; do cp "$merged/$f" "corpus/$target/"; done
  rm -rf "$merged"
  echo "$target: $(ls "corpus/$target" | wc -l) corpus files, $(du -sh "corpus/$target" | cut -f1)"
done
