//go:build tools

// Package controlplane pins, in go.mod, the Kubernetes release whose binaries
// the kubectl-sched tests run against. build.sh builds them from these imports.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
