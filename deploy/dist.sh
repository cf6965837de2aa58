#!/usr/bin/env bash
# The release archives and the krew manifest made from them (deploy/RELEASING.md; `make dist`,
# `make dist-check`).
#
#   deploy/dist.sh build        static binaries (the `dist` profile) for DIST_TARGETS, one archive per
#                               binary and target in DIST_DIR, each with its .sha256, then `manifest`
#   deploy/dist.sh manifest     DIST_DIR/sched.yaml: deploy/krew/sched.yaml with one platform per
#                               kubectl-sched archive present in DIST_DIR, its sha256 computed from
#                               the archive itself (platforms without an archive are left out)
#   deploy/dist.sh check        the archives against their .sha256 files, then krew's own install
#                               logic (krew v0.4.3, built from the Go module proxy once) installs
#                               the linux/amd64 archive with DIST_DIR/sched.yaml into a temporary
#                               KREW_ROOT, and the installed plugin runs through kubectl
#                               (--version, --help, explain on the bundled example)
#
# Environment: DIST_DIR (default dist), DIST_TARGETS (default x86_64-unknown-linux-musl: the only
# target this machine has a standard library and a C toolchain for), DIST_VERSION (default v + the
# workspace version), DIST_BASE_URL (where the archives are published; default the GitHub release
# of DIST_VERSION), SOURCE_DATE_EPOCH (the archives' file times; default the last commit's), CARGO.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CARGO=${CARGO:-cargo}
DIST_DIR=${DIST_DIR:-$ROOT/dist}
DIST_TARGETS=${DIST_TARGETS:-x86_64-unknown-linux-musl}
TEMPLATE=$ROOT/deploy/krew/sched.yaml
KREW_VERSION=v0.4.3

die() {
  echo "deploy/dist.sh: $*" >&2
  exit 1
}

# krew's platform (os, arch) for each Rust target the archives are built for.
krew_platform() {
  case $1 in
    x86_64-unknown-linux-musl) echo "linux amd64" ;;
    aarch64-unknown-linux-musl) echo "linux arm64" ;;
    x86_64-apple-darwin) echo "darwin amd64" ;;
    aarch64-apple-darwin) echo "darwin arm64" ;;
    *) return 1 ;;
  esac
}
KNOWN_TARGETS="x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-apple-darwin aarch64-apple-darwin"

workspace_version() {
  # [workspace.package] version = "X.Y.Z" in the root Cargo.toml, the one version of every crate.
  awk '/^\[workspace\.package\]/ {in_pkg = 1; next} /^\[/ {in_pkg = 0}
       in_pkg && $1 == "version" {gsub(/"/, "", $3); print $3; exit}' "$ROOT/Cargo.toml"
}
VERSION=${DIST_VERSION:-v$(workspace_version)}
[[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || die "version '$VERSION' is not vX.Y.Z (DIST_VERSION, or [workspace.package] version in Cargo.toml)"
# The GitHub release the archives are uploaded to (RELEASING.md, step 4); `repository` in Cargo.toml.
REPOSITORY=$(awk -F'"' '$1 ~ /^repository *= *$/ {print $2; exit}' "$ROOT/Cargo.toml")
DIST_BASE_URL=${DIST_BASE_URL:-$REPOSITORY/releases/download/$VERSION}

sha256_of() {
  sha256sum "$1" | cut -d' ' -f1
}

# A reproducible archive: fixed order, owner and times, gzip without a name or time stamp; the same
# binary gives the same sha256.
pack() {
  local archive=$1 stage=$2
  shift 2
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" \
    -C "$stage" -cf - "$@" | gzip -9n >"$archive.tmp"
  mv "$archive.tmp" "$archive"
  (cd "$(dirname "$archive")" && sha256sum "$(basename "$archive")" >"$archive.sha256")
}

build() {
  command -v "$CARGO" >/dev/null || die "'$CARGO' is not on PATH; install Rust with rustup (https://rustup.rs)"
  command -v readelf >/dev/null || die "readelf is missing (binutils, which comes with a C compiler)"
  local sysroot
  # In the checkout, rustup's rustc is the toolchain rust-toolchain.toml selects, cargo's own.
  sysroot=$(cd "$ROOT" && rustc --print sysroot)
  for target in $DIST_TARGETS; do
    krew_platform "$target" >/dev/null || die "unknown target $target (known: $KNOWN_TARGETS)"
    [[ -d $sysroot/lib/rustlib/$target ]] ||
      die "the Rust standard library for $target is not installed: rustup target add $target"
    case $target in
      x86_64-unknown-linux-musl)
        # ring's and jemalloc's C code is compiled by cc-rs with musl-gcc for this target; without
        # it they would be built against glibc's headers.
        command -v musl-gcc >/dev/null ||
          die "musl-gcc is missing (ring and jemalloc compile C for $target): apt-get install musl-tools" ;;
    esac
  done

  mkdir -p "$DIST_DIR"
  EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}
  for target in $DIST_TARGETS; do
    local start=$SECONDS
    echo "deploy/dist.sh: cargo build --profile dist --target $target (kubectl-sched, sched-webhook)" >&2
    "$CARGO" build --profile dist --locked --target "$target" -p kubectl-sched -p sched-webhook
    echo "deploy/dist.sh: built $target in $((SECONDS - start)) s" >&2
    local out=${CARGO_TARGET_DIR:-$ROOT/target}/$target/dist
    for bin in kubectl-sched sched-webhook; do
      # Static: no program interpreter (the dynamic loader) to find on the user's machine.
      if readelf -lW "$out/$bin" | grep -q INTERP; then
        die "$out/$bin is dynamically linked; the archives hold static binaries"
      fi
      local stage
      stage=$(mktemp -d)
      install -m 0755 "$out/$bin" "$stage/$bin"
      install -m 0644 "$ROOT/LICENSE" "$stage/LICENSE"
      pack "$DIST_DIR/$bin-$VERSION-$target.tar.gz" "$stage" "$bin" LICENSE
      rm -rf "$stage"
      printf 'deploy/dist.sh: %s: binary %s bytes, archive %s bytes\n' "$bin-$VERSION-$target.tar.gz" \
        "$(stat -c %s "$out/$bin")" "$(stat -c %s "$DIST_DIR/$bin-$VERSION-$target.tar.gz")" >&2
    done
  done
  manifest
}

manifest() {
  [[ -f $TEMPLATE ]] || die "$TEMPLATE is missing"
  local out=$DIST_DIR/sched.yaml platforms="" found=0
  for archive in "$DIST_DIR"/kubectl-sched-"$VERSION"-*.tar.gz; do
    [[ -e $archive ]] || continue
    local name target platform
    name=$(basename "$archive")
    target=${name#kubectl-sched-"$VERSION"-}
    target=${target%.tar.gz}
    platform=$(krew_platform "$target") || die "$archive: unknown target $target (known: $KNOWN_TARGETS)"
    found=$((found + 1))
    platforms+="    - selector:
        matchLabels:
          os: ${platform% *}
          arch: ${platform#* }
      uri: $DIST_BASE_URL/$name
      sha256: \"$(sha256_of "$archive")\"
      bin: kubectl-sched
      files:
        - from: kubectl-sched
          to: .
        - from: LICENSE
          to: .
"
  done
  ((found > 0)) || die "no archive kubectl-sched-$VERSION-<target>.tar.gz in $DIST_DIR (make dist builds them)"
  # The template's plugin text (from apiVersion to platforms:, its placeholder comments left out)
  # with the version set, then the platforms of the archives present.
  {
    echo "# Generated by deploy/dist.sh from deploy/krew/sched.yaml and the archives beside this file."
    awk -v version="$VERSION" '
      /^apiVersion:/ {copy = 1}
      copy && /^  platforms:/ {print; exit}
      copy && /^  version:/ {print "  version: " version; next}
      copy {print}' "$TEMPLATE"
    printf '%s' "$platforms"
  } >"$out.tmp"
  grep -q '^  platforms:$' "$out.tmp" || die "$TEMPLATE has no spec.platforms"
  mv "$out.tmp" "$out"
  echo "deploy/dist.sh: wrote $out ($found platform(s), $VERSION)" >&2
}

check() {
  local archive=$DIST_DIR/kubectl-sched-$VERSION-x86_64-unknown-linux-musl.tar.gz
  [[ -f $archive && -f $DIST_DIR/sched.yaml ]] || die "no $archive or $DIST_DIR/sched.yaml (make dist builds them)"
  (cd "$DIST_DIR" && sha256sum -c ./*.tar.gz.sha256) || die "an archive does not match its .sha256"

  # krew itself, built once from its Go module (the Go module proxy), cached beside the control plane.
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/krew-$KREW_VERSION/bin
  if [[ ! -x $cache/krew ]]; then
    command -v go >/dev/null || die "go is missing: krew $KREW_VERSION is built from source (Go >= 1.26)"
    echo "deploy/dist.sh: go install sigs.k8s.io/krew/cmd/krew@$KREW_VERSION (once)" >&2
    mkdir -p "$cache"
    GOBIN=$cache GOFLAGS= go install "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION"
  fi
  local kubectl=${KUBECTL_SCHED_K8S_BIN:-}/kubectl
  [[ -x $kubectl ]] || die "no kubectl in KUBECTL_SCHED_K8S_BIN ('${KUBECTL_SCHED_K8S_BIN:-}'): make controlplane builds it"

  local krew_root
  krew_root=$(mktemp -d)
  trap 'rm -rf "$krew_root"' RETURN
  # KREW_ROOT: a private krew home; no index is needed with --manifest, nothing is downloaded with
  # --archive (krew still checks the archive against the manifest's sha256).
  KREW_ROOT=$krew_root KREW_NO_UPGRADE_CHECK=1 PATH=$krew_root/bin:$PATH \
    "$cache/krew" install --manifest="$DIST_DIR/sched.yaml" --archive="$archive" </dev/null
  [[ -x $krew_root/bin/kubectl-sched && -f $krew_root/receipts/sched.yaml ]] ||
    die "krew did not install sched (no $krew_root/bin/kubectl-sched or receipts/sched.yaml)"
  # kubectl finds the plugin on PATH, as it would on a user's machine.
  local run=(env PATH="$krew_root/bin:$PATH" "$kubectl")
  "${run[@]}" plugin list 2>&1 | grep -q "$krew_root/bin/kubectl-sched" ||
    die "kubectl plugin list does not show $krew_root/bin/kubectl-sched"
  local version
  version=$("${run[@]}" sched --version)
  [[ $version == "kubectl-sched ${VERSION#v}" ]] || die "kubectl sched --version printed '$version', not kubectl-sched ${VERSION#v}"
  "${run[@]}" sched --help >/dev/null
  # The bundled example, offline: the engine itself runs in the installed static binary.
  "${run[@]}" sched explain report-builder -n shop --from "$ROOT/examples/cluster.yaml" >/dev/null
  # (krew uninstall is not run: it insists on a cloned plugin index, which --manifest does without.)
  echo "deploy/dist.sh: krew $KREW_VERSION installed $(basename "$archive") with $DIST_DIR/sched.yaml" \
    "(and wrote its receipt); kubectl sched --version, --help and explain ran" >&2
}

case ${1:-build} in
  build) build ;;
  manifest) manifest ;;
  check) check ;;
  *) die "usage: deploy/dist.sh [build|manifest|check]" ;;
esac
