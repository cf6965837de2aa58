#!/usr/bin/env bash
# Installs the real Prometheus the pending-reason metrics are tested with: Debian's prometheus
# package (2.42, which ships prometheus and promtool), downloaded with `apt-get download` (no root,
# nothing installed system-wide) and unpacked with `dpkg -x` into a cache directory outside the
# repository. Idempotent: a second run finds the binaries and does nothing.
#
#   tests/prometheus/install.sh     # installs what is missing, prints the directory
#
# KUBECTL_SCHED_PROMETHEUS_DIR=/some/dir overrides
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/prometheus-2.42. The binaries end up in its
# usr/bin/ (prometheus, promtool).
set -euo pipefail

# The one place the release is pinned: Debian 12's prometheus (2.42.0+ds-5+deb12u1 and later
# security updates of 2.42).
series=2.42
dir=${KUBECTL_SCHED_PROMETHEUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-sched/prometheus-$series}
if [ -x "$dir/usr/bin/prometheus" ] && [ -x "$dir/usr/bin/promtool" ]; then
  echo "install.sh: prometheus $(cat "$dir/VERSION" 2>/dev/null || echo "$series") already in $dir" >&2
  echo "$dir"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1 || {
  echo "install.sh: prometheus is missing from $dir and this is no Debian system (apt-get, dpkg); install Prometheus $series and set KUBECTL_SCHED_PROMETHEUS_DIR to a directory with usr/bin/prometheus and usr/bin/promtool" >&2
  exit 1
}
version=$(apt-cache policy prometheus | awk '$1 == "Candidate:" {print $2}')
case "$version" in
  "$series".*) ;;
  *) echo "install.sh: apt's candidate for prometheus is '${version:-none}', not $series.x (run 'apt-get update' on a Debian 12 system)" >&2; exit 1 ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-sched-prometheus.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "install.sh: downloading prometheus $version ..." >&2
chmod 0755 "$work"  # apt fetches as its own user (_apt) where it can
(cd "$work" && apt-get download -q "prometheus=$version" >&2)
deb=$(ls "$work"/prometheus_*.deb)
# Unpacked beside the final directory, then moved: an interrupted run leaves no half-installed tree.
mkdir -p "$(dirname "$dir")"
tmp=$(mktemp -d "$dir.XXXXXX")
dpkg -x "$deb" "$tmp"
echo "$version" > "$tmp/VERSION"
rm -rf "$dir"
mv "$tmp" "$dir"
"$dir/usr/bin/promtool" --version >&2
echo "$dir"
