// Command etcd is a tiny wrapper around etcd's own entry point, so that the
// test control plane can build etcd from the Go module proxy at the version the
// pinned Kubernetes release depends on.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
