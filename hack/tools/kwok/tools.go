//go:build tools

// Package tools pins the kwok source that `make tools` builds: simulated
// Nodes that take Pods to Running with pod IPs and readiness, and answer a
// pod's exec with a local command, without containers. Its own module, so
// that kwok's Kubernetes libraries never meet the project's.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
