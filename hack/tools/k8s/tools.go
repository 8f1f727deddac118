//go:build tools

// Package tools pins the Kubernetes and etcd sources that `make tools` builds
// into real kube-apiserver, kube-controller-manager, kubectl and etcd
// binaries for the test harness. It lives in
// its own module so the project's go.mod never depends on k8s.io/kubernetes.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
