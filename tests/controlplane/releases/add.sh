#!/usr/bin/env bash
# Writes the Go module that pins one more Kubernetes release for the version tests: kube-apiserver and
# kube-scheduler of vX.Y.Z, from the Go module proxy, into releases/vX.Y/ (one directory per minor; a
# newer patch of the same minor replaces the older one).
#
#   tests/controlplane/releases/add.sh v1.35.4
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and
# replaces them with ./staging in its own repository, which a dependent module does not inherit: the
# module written here replaces each with its published v0.Y.Z, as the release's own go.mod lists them.
set -euo pipefail
version=${1:?usage: add.sh vX.Y.Z}
[[ $version =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "add.sh: $version is not vMAJOR.MINOR.PATCH of Kubernetes 1.x" >&2; exit 1; }
minor=${BASH_REMATCH[1]}
staging_version=v0.${version#v1.}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$here/v1.$minor
command -v go >/dev/null 2>&1 || { echo "add.sh: 'go' is not on PATH" >&2; exit 1; }

release_mod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -f "$release_mod" ] || { echo "add.sh: the Go module proxy does not serve k8s.io/kubernetes@$version" >&2; exit 1; }
mapfile -t staging < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$release_mod")
[ "${#staging[@]}" -gt 0 ] || { echo "add.sh: no staging modules in $release_mod" >&2; exit 1; }

rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
cat > tools.go <<'GO'
//go:build tools

// Package release pins, in go.mod, one Kubernetes release whose kube-apiserver and kube-scheduler the
// version tests compare kubectl-sched against. ../../build.sh builds them from these imports.
package release

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
go mod init kubectl-sched.dev/controlplane/release >/dev/null 2>&1
go mod edit -require "k8s.io/kubernetes@$version"
for module in "${staging[@]}"; do go mod edit -replace "$module=$module@$staging_version"; done
go mod tidy
echo "$dir"
