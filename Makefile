# mcs-dns: DNS for Kubernetes Multi-Cluster Services.
# `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

K8S_VERSION ?= 1.37.2
ROOT := $(abspath .)
# Your own kube-apiserver and etcd: MCS_DNS_K8S_ASSETS names their folder;
# `make tools` then builds nothing. (Not KUBEBUILDER_ASSETS, often a folder
# other projects' tests run from: `make reap` stops every API server and
# etcd started from this folder.)
export MCS_DNS_K8S_ASSETS ?= $(ROOT)/.cache/k8s/$(K8S_VERSION)
GO ?= go
GOFLAGS_TEST ?= -race -timeout 40m

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: ## Build kube-apiserver, kube-controller-manager, etcd and kwok into .cache/k8s/ (once; 10-20 min cold) and apt-install dig, dnsperf if missing
	@hack/tools.sh

.PHONY: build
build: ## Build our CoreDNS (with the mcs plugin) and mcs-importer into bin/
	@mkdir -p bin
	$(GO) build -o bin/coredns ./cmd/coredns
	$(GO) build -o bin/mcs-importer ./cmd/mcs-importer

.PHONY: vet
vet: ## go vet every package
	$(GO) vet ./...

.PHONY: test
test: tools vet ## go vet, then every unit, integration and e2e test with -race against real API servers
	@trap 'hack/reap.sh' EXIT; $(GO) test $(GOFLAGS_TEST) ./...

.PHONY: test-short
test-short: ## Only the pure unit tests (no API servers)
	$(GO) test -short ./...

.PHONY: bench
bench: tools build ## mcs vs CoreDNS's in-tree multicluster vs whoami (dnsperf, RSS, start-up, programming latency, importer) + go test -bench; see BENCHMARKS.md
	@mkdir -p .bench/bin
	$(GO) build -o .bench/bin/bench ./hack/bench
	.bench/bin/bench -out .bench -go-bench ./plugin/... $(BENCH_FLAGS)

.PHONY: demo
demo: tools build ## Three local member clusters, mcs-importer, our CoreDNS per cluster, and dig answers (Ctrl-C stops)
	$(GO) run ./hack/demo $(DEMO_ARGS)

.PHONY: conformance
conformance: tools build ## SIG-Multicluster's MCS conformance suite on three members with real control planes, in each VIP mode; writes CONFORMANCE.md
	@mkdir -p .cache/conformance
	cd hack/conformance/suite && $(GO) test -c -o $(ROOT)/.cache/conformance/conformance.test .
	$(GO) run ./hack/conformance $(CONFORMANCE_ARGS)

.PHONY: demo-down
demo-down: ## Stop a running demo and every process it started
	@if [ -f .demo/demo.pid ]; then kill -TERM "$$(cat .demo/demo.pid)" 2>/dev/null || true; sleep 3; fi
	@hack/reap.sh
	@echo "demo stopped"

.PHONY: reap
reap: ## Stop any kube-apiserver, etcd, coredns or mcs-importer a killed test left behind
	@hack/reap.sh

.PHONY: clean
clean: reap ## Remove bin/, .bench/ and .demo/ (keeps the .cache/ of built API servers)
	rm -rf bin .bench .demo .conformance
