# mcs-dns: DNS for Kubernetes Multi-Cluster Services.
# `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

K8S_VERSION ?= 1.37.2
ROOT := $(abspath .)
# Your own kube-apiserver and etcd: MCS_DNS_K8S_ASSETS names their folder;
# `make tools` then builds nothing. (Not KUBEBUILDER_ASSETS, often a folder
# other projects' tests run from.)
export MCS_DNS_K8S_ASSETS ?= $(ROOT)/.cache/k8s/$(K8S_VERSION)
GO ?= go
# Every process a run starts carries this ID in its environment, so that
# hack/reap.sh can stop exactly what this run (or, with `make reap`, any
# run of this checkout) left behind.
ifndef MCS_DNS_RUN_ID
MCS_DNS_RUN_ID := $(shell head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
endif
export MCS_DNS_RUN_ID
RECORD_RUN = mkdir -p .cache/runs && touch .cache/runs/$(MCS_DNS_RUN_ID)
# -count=1: many tests build and run the binaries (procs.Build), which go test's
# result cache does not see, so a cached pass could be of older binaries.
GOFLAGS_TEST ?= -race -count=1 -timeout 40m

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: ## Build kube-apiserver, kube-controller-manager, etcd, kwok and kubectl into .cache/k8s/ and staticcheck into .cache/tools/ (once; 10-20 min cold)
	@hack/tools.sh

.PHONY: apt
apt: ## apt-install dig/nslookup (bind9-dnsutils) and dnsperf if missing (the demo, bench and conformance use them; tests do not)
	@hack/apt.sh

.PHONY: build
build: ## Build our CoreDNS (with the mcs plugin), mcs-importer and the kubectl plugin kubectl-mcs into bin/
	@mkdir -p bin
	$(GO) build -o bin/coredns ./cmd/coredns
	$(GO) build -o bin/mcs-importer ./cmd/mcs-importer
	$(GO) build -o bin/kubectl-mcs ./cmd/kubectl-mcs

.PHONY: images
images: ## OCI images of coredns and mcs-importer for linux/amd64 and linux/arm64 into bin/images/ (a layout per image, a docker-save tarball per platform; no container runtime needed), and their digests
	$(GO) run ./hack/images -out bin/images $(IMAGES_ARGS)

.PHONY: vet
vet: ## go vet every package
	$(GO) vet ./...

.PHONY: lint
lint: tools ## gofmt -l, go vet and staticcheck: all clean
	@out=$$(git ls-files '*.go' | grep -v '^hack/conformance/suite/' | xargs gofmt -l); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	.cache/tools/staticcheck ./...

.PHONY: test
test: tools lint ## gofmt, go vet and staticcheck, then every unit, integration and e2e test with -race against real API servers
	@$(RECORD_RUN); trap 'hack/reap.sh' EXIT; $(GO) test $(GOFLAGS_TEST) ./...

.PHONY: test-short
test-short: ## Only the pure unit tests (no API servers)
	$(GO) test -short ./...

.PHONY: chart-lint
chart-lint: ## Lint the Helm chart deploy/helm/mcs-dns and check what it renders (no API servers; make test also installs it)
	$(GO) test -short -count=1 ./deploy/helm/

.PHONY: bench
bench: tools apt build ## mcs vs CoreDNS's in-tree multicluster vs whoami (dnsperf, RSS, start-up, programming latency, importer) + go test -bench; see BENCHMARKS.md
	@mkdir -p .bench/bin
	$(GO) build -o .bench/bin/bench ./hack/bench
	@$(RECORD_RUN)
	.bench/bin/bench -out .bench -doc BENCHMARKS.md -go-bench ./plugin/... $(BENCH_FLAGS)

FUZZTIME ?= 60s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 60s); a crash is saved under the package's testdata/fuzz/ and make test replays it
	@FUZZTIME=$(FUZZTIME) hack/fuzz.sh

SOAK_DURATION ?= 60s
SOAK_QPS ?= 5000

.PHONY: soak
soak: tools apt ## Our CoreDNS under dnsperf load while EndpointSlices and ServiceImports churn (SOAK_DURATION=60s, SOAK_QPS=5000): no SERVFAIL, every answer a state the API held (staleness reported), RSS and goroutines flat
	@$(RECORD_RUN); trap 'hack/reap.sh' EXIT; MCS_DNS_SOAK_DURATION=$(SOAK_DURATION) MCS_DNS_SOAK_QPS=$(SOAK_QPS) MCS_DNS_SOAK_RACE=0 \
		$(GO) test -count=1 -timeout 30m -run '^TestSoak$$' -v ./test/soak

CHAOS_MEMBERS ?= 5
CHAOS_DURATION ?= 10m
# derived-service, or clusterset-cidr (VIPs from one clusterset-wide CIDR).
CHAOS_VIP_MODE ?= derived-service
# The importers' logs of every run, passing ones too: <dir>/<seed>/.
CHAOS_LOG_DIR ?= $(ROOT)/.cache/chaos-logs

.PHONY: chaos
chaos: tools ## Randomized, seeded faults and workload on CHAOS_MEMBERS (5) real members, two leader-elected importers and a CoreDNS per member for CHAOS_DURATION (10m), invariants checked against a model; CHAOS_SEED replays a run (RELIABILITY.md)
	@$(RECORD_RUN); trap 'hack/reap.sh' EXIT; \
		seed=$${CHAOS_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
		echo "chaos: CHAOS_SEED=$$seed CHAOS_MEMBERS=$(CHAOS_MEMBERS) CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_VIP_MODE=$(CHAOS_VIP_MODE)"; \
		CHAOS_SEED=$$seed CHAOS_MEMBERS=$(CHAOS_MEMBERS) CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_VIP_MODE=$(CHAOS_VIP_MODE) CHAOS_LOG_DIR=$(CHAOS_LOG_DIR) \
		$(GO) test -count=1 -timeout 60m -run '^TestChaos$$' -v ./test/chaos

.PHONY: demo
demo: tools apt build ## Three local member clusters, mcs-importer, our CoreDNS per cluster, and dig answers (Ctrl-C stops)
	@$(RECORD_RUN)
	$(GO) run ./hack/demo $(DEMO_ARGS)

.PHONY: conformance
conformance: tools apt build ## SIG-Multicluster's MCS conformance suite on three members with real control planes, in each VIP mode; writes CONFORMANCE.md
	@mkdir -p .cache/conformance
	cd hack/conformance/suite && $(GO) test -c -o $(ROOT)/.cache/conformance/conformance.test .
	@$(RECORD_RUN); trap 'hack/reap.sh' EXIT; $(GO) run ./hack/conformance $(CONFORMANCE_ARGS)

.PHONY: demo-down
demo-down: ## Stop a running demo and every process it started
	@if [ -f .demo/demo.pid ]; then kill -TERM "$$(cat .demo/demo.pid)" 2>/dev/null || true; sleep 3; fi
	@env -u MCS_DNS_RUN_ID hack/reap.sh
	@echo "demo stopped"

.PHONY: reap
reap: ## Stop every process a run of this checkout (make test/demo/bench/conformance) started and left behind, and only those
	@env -u MCS_DNS_RUN_ID hack/reap.sh

.PHONY: clean
clean: reap ## Remove bin/, .bench/ and .demo/ (keeps the .cache/ of built API servers)
	rm -rf bin .bench .demo .conformance
