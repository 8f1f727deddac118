#!/usr/bin/env bash
# Stops processes a killed or timed-out test run left behind. A Go test that
# panics on -timeout exits without running t.Cleanup, so the kube-apiserver and
# etcd it started (envtest puts them in their own process group) would live on.
# Only our own binaries are matched: those under this repository's .cache/ and
# bin/, and the test binaries' copies in temporary folders.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
assets=${MCS_DNS_K8S_ASSETS:-$root/.cache/k8s}
patterns=(
	"^$assets/[^ ]*(kube-apiserver|etcd|kube-controller-manager|kwok) "
	"^$root/bin/(coredns|mcs-importer)"
	"/mcs-dns-test-bin/(coredns|mcs-importer)"
)
for p in "${patterns[@]}"; do
	pkill -TERM -f -- "$p" 2>/dev/null || true
done
sleep 1
for p in "${patterns[@]}"; do
	pkill -KILL -f -- "$p" 2>/dev/null || true
done
exit 0
