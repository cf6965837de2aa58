//go:build tools

// Package release pins, in go.mod, one Kubernetes release whose kube-apiserver and kube-scheduler the
// version tests compare kubectl-sched against. ../../build.sh builds them from these imports.
package release

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
