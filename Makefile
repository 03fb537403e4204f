# Flotilla. `make demo` shows it working on local clusters; `make test` runs every test.
# Go is the only prerequisite: `make tools` builds everything else from the Go module proxy.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

include test/tools/versions.env

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/flotilla-dev/flotilla/pkg/version.version=$(VERSION) -X github.com/flotilla-dev/flotilla/pkg/version.commit=$(COMMIT)

TOOLS_DIR := $(shell test/tools/install.sh print-dir)
export FLOTILLA_TOOLS_DIR := $(TOOLS_DIR)
KUBECTL := $(TOOLS_DIR)/kubectl
GINKGO  := $(TOOLS_DIR)/ginkgo
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint
DEV_DIR := .testbed
E2E_TIMEOUT ?= 40m
# Plain output in CI logs.
GINKGO_FLAGS ?= $(if $(CI),--no-color,)

UNIT_PKGS = $$(go list ./... | grep -v -e /test/e2e -e /test/integration)

.PHONY: help
help: ## Show the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Build and cache the test bed's binaries (kube-*, etcd, kwok, kubectl, helm, controller-gen, ginkgo, golangci-lint)
	@test/tools/install.sh

.PHONY: build
build: ## Build bin/flotilla-manager and bin/flotillactl
	go build -ldflags "$(LDFLAGS)" -o bin/flotilla-manager ./cmd/flotilla-manager
	go build -ldflags "$(LDFLAGS)" -o bin/flotillactl ./cmd/flotillactl

CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen

.PHONY: generate
generate: tools ## Deep copies and CRDs from pkg/apis (controller-gen); CRDs also into the chart
	$(CONTROLLER_GEN) object paths=./pkg/apis/...
	$(CONTROLLER_GEN) crd paths=./pkg/apis/... output:crd:artifacts:config=config/crd/bases
	@# The Replicator embeds core types (pod template, Service, Ingress): without their long
	@# descriptions its CRD stays small enough for a client-side kubectl apply (documented in docs/replicator.md).
	@tmp=$$(mktemp -d) && $(CONTROLLER_GEN) crd:maxDescLen=0 paths=./pkg/apis/... output:crd:artifacts:config=$$tmp && \
		cp $$tmp/flotilla.dev_replicators.yaml config/crd/bases/ && rm -rf $$tmp
	@mkdir -p charts/flotilla/crds && cp config/crd/bases/*.yaml charts/flotilla/crds/

.PHONY: verify-generated
verify-generated: generate ## Fail when generated files are not up to date
	@git diff --exit-code --stat -- pkg/apis config/crd charts/flotilla/crds || { echo "generated files changed: run make generate and commit"; exit 1; }

.PHONY: verify
verify: ## gofmt, go vet and a tidy go.mod
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	@go mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy"; go mod tidy -diff; exit 1; }

.PHONY: lint
lint: tools ## golangci-lint with .golangci.yml (the style contract)
	$(GOLANGCI_LINT) run ./...

.PHONY: unit
unit: ## Unit tests (no clusters)
	go test -count=1 $(UNIT_PKGS)

FUZZTIME ?= 15s

.PHONY: fuzz
fuzz: ## Fuzz the webhook's admission and the delegate translation briefly (FUZZTIME=15s); seeds in webhook/fuzz_test.go
	go test ./webhook -run '^$$' -fuzz FuzzAdmitAndDelegate -fuzztime $(FUZZTIME)

.PHONY: integration
integration: tools ## Integration suites: controllers and the webhook on real API servers (envtest with the bed's kube-apiserver and etcd)
	$(GINKGO) -v $(GINKGO_FLAGS) --timeout=15m ./test/integration/...

.PHONY: e2e
e2e: tools ## End-to-end suites on a fresh local test bed (one bed per run)
	$(GINKGO) -v $(GINKGO_FLAGS) --timeout=$(E2E_TIMEOUT) --poll-progress-after=120s ./test/e2e

.PHONY: test
test: verify verify-generated lint unit fuzz integration e2e ## Every test: verify, generated files, lint, unit, fuzz, integration, e2e

BENCH_PODS ?= 200

.PHONY: bench
bench: tools ## Benchmark: N pods direct in one secondary vs elected over two (BENCH_PODS=200); JSON in bench.json
	go run ./test/bench --pods $(BENCH_PODS) --out bench.json

.PHONY: dev-up
dev-up: tools ## Start a primary and two secondaries; kubeconfig in .testbed/kubeconfig
	go run ./test/testbed/cmd/flotilla-testbed up --dir $(DEV_DIR)

.PHONY: dev-down
dev-down: ## Stop the manager and every cluster dev-up or demo started
	@test/demo/manager.sh stop $(DEV_DIR)
	go run ./test/testbed/cmd/flotilla-testbed down --dir $(DEV_DIR)

.PHONY: demo
demo: build dev-up ## Build, start the bed and the manager, and show the clusters
	@KUBECTL=$(KUBECTL) test/demo/demo.sh $(DEV_DIR)

.PHONY: clean
clean: ## Remove build outputs (not the tools cache, not a running bed)
	rm -rf bin
