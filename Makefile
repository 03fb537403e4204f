# Flotilla. `make demo` shows it working on local clusters; `make test` runs every test.
# Go is the only prerequisite: test/tools/install.sh builds everything else from the Go module
# proxy, each target only the sets of tools it uses (`make tools`: all of them).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

include test/tools/versions.env

# The version is the chart's appVersion (charts/flotilla/Chart.yaml): the image's tag, the chart's
# version and flotillactl's; make release refuses a chart whose version differs.
VERSION ?= v$(shell sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$$/\1/p' charts/flotilla/Chart.yaml)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/flotilla-dev/flotilla/pkg/version.version=$(VERSION) -X github.com/flotilla-dev/flotilla/pkg/version.commit=$(COMMIT)

# One build configuration for every step, static as the image and the e2e suite build the
# manager: the Go build cache one step fills then serves the others (a cgo build of the same
# packages is a second compile of all of them, which cost the e2e suite 3.5 minutes from cold).
export CGO_ENABLED := 0

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

# $(call tools-for,SETS): build and cache the sets of test/tools/install.sh a target uses (seconds
# once cached).
tools-for = @test/tools/install.sh $(1)

.PHONY: tools
tools: ## Build and cache every tool (kube-*, etcd, kwok, kubectl, helm, metrics-server, CoreDNS, cert-manager, promrules, the CSI stack, controller-gen, ginkgo, golangci-lint)
	$(call tools-for,all)

.PHONY: build
build: ## Build bin/flotilla-manager and bin/flotillactl
	go build -ldflags "$(LDFLAGS)" -o bin/flotilla-manager ./cmd/flotilla-manager
	go build -ldflags "$(LDFLAGS)" -o bin/flotillactl ./cmd/flotillactl

# Release artefacts (docs/release.md), built without Docker. The image's tag is the chart's
# appVersion, so the image the chart deploys by default is the one make image names.
IMAGE_REPO ?= ghcr.io/flotilla-dev/flotilla-manager
IMAGE_TAG ?= $(shell sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$$/\1/p' charts/flotilla/Chart.yaml)
# Numeric, so that the chart's runAsNonRoot holds without a runAsUser.
IMAGE_USER := 65532:65532
PLATFORMS ?= linux/amd64
PUSH_PLATFORMS ?= linux/amd64 linux/arm64
PLUGIN_PLATFORMS ?= linux/amd64
PLUGIN_URL ?= https://github.com/flotilla-dev/flotilla/releases/download/$(IMAGE_TAG)
IMAGE_LABELS = --label org.opencontainers.image.source=https://github.com/flotilla-dev/flotilla \
	--label org.opencontainers.image.version=$(IMAGE_TAG) --label org.opencontainers.image.revision=$(COMMIT)

# $(call cross-build,PLATFORMS,DIR,NAME,PACKAGE): a static DIR/<os>_<arch>/NAME (.exe on windows) per os/arch.
define cross-build
for p in $(1); do \
	[[ $$p =~ ^[a-z0-9]+/[a-z0-9]+$$ ]] || { echo "platform $$p: want os/arch, such as linux/arm64"; exit 1; }; \
	os=$${p%/*}; arch=$${p#*/}; ext=; if [[ $$os == windows ]]; then ext=.exe; fi; \
	echo "go build $(4) for $$p"; \
	CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(2)/$${os}_$${arch}/$(3)$$ext $(4); \
done
endef

.PHONY: image
image: ## Manager image, no Docker: bin/image/flotilla-manager.tar of the first of PLATFORMS=linux/amd64 (add linux/arm64 to cross-build it too)
	@test -n "$(IMAGE_TAG)" || { echo "IMAGE_TAG is empty: no appVersion in charts/flotilla/Chart.yaml"; exit 1; }
	@$(call cross-build,$(PLATFORMS),bin/image,flotilla-manager,./cmd/flotilla-manager)
	@go run ./hack/image --ref $(IMAGE_REPO):$(IMAGE_TAG) --entrypoint /flotilla-manager --user $(IMAGE_USER) $(IMAGE_LABELS) \
		$(foreach p,$(PLATFORMS),--binary $(p)=bin/image/$(subst /,_,$(p))/flotilla-manager) \
		--platform $(firstword $(PLATFORMS)) --out bin/image/flotilla-manager.tar
	@echo "image $(IMAGE_REPO):$(IMAGE_TAG) ($(firstword $(PLATFORMS))): bin/image/flotilla-manager.tar, $$(du -h bin/image/flotilla-manager.tar | cut -f1)"
	@echo "load it into a node's containerd: ctr -n k8s.io images import bin/image/flotilla-manager.tar (kind: kind load image-archive bin/image/flotilla-manager.tar)"

.PHONY: image-push
image-push: ## Push REGISTRY/flotilla-manager:IMAGE_TAG for PUSH_PLATFORMS=linux/amd64 linux/arm64 (make image-push REGISTRY=ghcr.io/you; docker login's credentials)
	@test -n "$(REGISTRY)" || { echo "image-push needs REGISTRY, e.g. make image-push REGISTRY=ghcr.io/flotilla-dev"; exit 1; }
	@test -n "$(IMAGE_TAG)" || { echo "IMAGE_TAG is empty: no appVersion in charts/flotilla/Chart.yaml"; exit 1; }
	@$(call cross-build,$(PUSH_PLATFORMS),bin/image,flotilla-manager,./cmd/flotilla-manager)
	@go run ./hack/image --ref $(REGISTRY)/flotilla-manager:$(IMAGE_TAG) --entrypoint /flotilla-manager --user $(IMAGE_USER) $(IMAGE_LABELS) \
		$(foreach p,$(PUSH_PLATFORMS),--binary $(p)=bin/image/$(subst /,_,$(p))/flotilla-manager) --push

.PHONY: plugin
plugin: ## kubectl plugin archives bin/plugin/kubectl-flotilla_<os>_<arch>.tar.gz for PLUGIN_PLATFORMS=linux/amd64 (add darwin/arm64, windows/amd64, ...) and their Krew manifest bin/plugin/flotilla.yaml
	@test -n "$(IMAGE_TAG)" || { echo "IMAGE_TAG is empty: no appVersion in charts/flotilla/Chart.yaml"; exit 1; }
	@$(call cross-build,$(PLUGIN_PLATFORMS),bin/plugin,kubectl-flotilla,./cmd/flotillactl)
	@go run ./hack/krew --template hack/krew/flotilla.yaml.tmpl --version $(IMAGE_TAG) --url-prefix $(PLUGIN_URL) --dir bin/plugin \
		$(if $(wildcard LICENSE),--license LICENSE) \
		$(foreach p,$(PLUGIN_PLATFORMS),--binary $(p)=bin/plugin/$(subst /,_,$(p))/kubectl-flotilla$(if $(filter windows/%,$(p)),.exe))

RELEASE_DIR ?= bin/release
RELEASE_IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
RELEASE_CLI_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
# Archives and layouts as reproducible as the image: sorted, numeric owners, one modification time.
RELEASE_TAR = tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$${SOURCE_DATE_EPOCH:-0}

.PHONY: release
release: ## Every artefact of a release in RELEASE_DIR=bin/release: the manager image as an OCI layout of linux/amd64 and linux/arm64 (one index), the chart archive, flotillactl for Linux, macOS and Windows on both architectures, an SPDX SBOM of each binary's modules, and SHA256SUMS; the version is the chart's
	$(call tools-for,helm)
	@test -n "$(IMAGE_TAG)" || { echo "release: no appVersion in charts/flotilla/Chart.yaml"; exit 1; }
	@chart=$$(sed -n 's/^version:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$$/\1/p' $(CHART)/Chart.yaml); \
	if [[ "$$chart" != "$(IMAGE_TAG)" ]]; then echo "release: the chart's version $$chart is not its appVersion $(IMAGE_TAG): one version names a release"; exit 1; fi; \
	grep -q '^## \[$(IMAGE_TAG)\]' CHANGELOG.md || { echo "release: CHANGELOG.md has no section ## [$(IMAGE_TAG)]"; exit 1; }
	@rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)/build
	@$(call cross-build,$(RELEASE_IMAGE_PLATFORMS),$(RELEASE_DIR)/build,flotilla-manager,./cmd/flotilla-manager)
	@go run ./hack/image --ref $(IMAGE_REPO):$(IMAGE_TAG) --entrypoint /flotilla-manager --user $(IMAGE_USER) $(IMAGE_LABELS) \
		$(foreach p,$(RELEASE_IMAGE_PLATFORMS),--binary $(p)=$(RELEASE_DIR)/build/$(subst /,_,$(p))/flotilla-manager) --layout $(RELEASE_DIR)/build/oci
	@$(RELEASE_TAR) -C $(RELEASE_DIR)/build/oci -cf $(RELEASE_DIR)/flotilla-manager_$(IMAGE_TAG)_oci.tar .
	@$(call cross-build,$(RELEASE_CLI_PLATFORMS),$(RELEASE_DIR)/build,flotillactl,./cmd/flotillactl)
	@for p in $(RELEASE_CLI_PLATFORMS); do d=$(RELEASE_DIR)/build/$${p/\//_}; cp README.md $$d/; \
		$(RELEASE_TAR) -C $$d -c flotillactl$$([[ $$p == windows/* ]] && echo .exe) README.md | gzip -n > $(RELEASE_DIR)/flotillactl_$(IMAGE_TAG)_$${p/\//_}.tar.gz; done
	@$(TOOLS_DIR)/helm package $(CHART) --destination $(RELEASE_DIR) >/dev/null
	@go run ./hack/sbom $(foreach p,$(RELEASE_IMAGE_PLATFORMS),$(RELEASE_DIR)/build/$(subst /,_,$(p))/flotilla-manager $(RELEASE_DIR)/flotilla-manager_$(IMAGE_TAG)_$(subst /,_,$(p)).spdx.json) \
		$(foreach p,$(RELEASE_CLI_PLATFORMS),$(RELEASE_DIR)/build/$(subst /,_,$(p))/flotillactl$(if $(filter windows/%,$(p)),.exe) $(RELEASE_DIR)/flotillactl_$(IMAGE_TAG)_$(subst /,_,$(p)).spdx.json) >/dev/null
	@rm -rf $(RELEASE_DIR)/build
	@cd $(RELEASE_DIR) && sha256sum $$(ls | grep -v '^SHA256SUMS$$') > SHA256SUMS && cat SHA256SUMS
	@# What was written, checked before anything is published: the sums, each binary's format and
	@# architecture (the arm64 image's manager an arm64 ELF), the chart's version, and the chart
	@# archive rendering as helm install would.
	@go run ./hack/releasecheck $(RELEASE_DIR) $(IMAGE_TAG)
	@$(TOOLS_DIR)/helm template flotilla $(RELEASE_DIR)/flotilla-$(IMAGE_TAG).tgz -n flotilla-system --kube-version 1.34.0 >/dev/null
	@echo "release $(IMAGE_TAG): $$(ls $(RELEASE_DIR) | wc -l) files in $(RELEASE_DIR) (checksums above, in SHA256SUMS), checked"

CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen

CHART := charts/flotilla
CHART_CRDS := $(CHART)/templates/crds

.PHONY: generate
generate: ## Deep copies and CRDs from pkg/apis (controller-gen); CRDs also as chart templates; the chart's README
	$(call tools-for,generate)
	$(CONTROLLER_GEN) object paths=./pkg/apis/...
	$(CONTROLLER_GEN) crd paths=./pkg/apis/... output:crd:artifacts:config=config/crd/bases
	@# The Replicator embeds core types (pod template, Service, Ingress): without their long
	@# descriptions its CRD stays small enough for a client-side kubectl apply (documented in docs/replicator.md).
	@tmp=$$(mktemp -d) && $(CONTROLLER_GEN) crd:maxDescLen=0 paths=./pkg/apis/... output:crd:artifacts:config=$$tmp && \
		cp $$tmp/flotilla.dev_replicators.yaml config/crd/bases/ && rm -rf $$tmp
	@# The chart's CRDs are templates, so helm upgrade upgrades them (Helm never upgrades crds/): each
	@# is rendered by crds.install and the role, labelled as the release's, and kept at uninstall by
	@# crds.keep (flotilla.crds.* in $(CHART)/templates/_helpers.tpl).
	@rm -rf $(CHART)/crds $(CHART_CRDS) && mkdir -p $(CHART_CRDS)
	@for f in config/crd/bases/*.yaml; do \
		name=$$(basename "$$f" .yaml); out=$(CHART_CRDS)/$$name.yaml; \
		{ echo "{{- /* Generated by make generate from $$f: edit pkg/apis, not this file. */ -}}"; \
		  echo "{{- if include \"flotilla.crds.render\" (list . \"$${name#*_}\") }}"; \
		  sed -e '/^metadata:$$/a\  labels: {{- include "flotilla.labels" . | nindent 4 }}' \
		      -e '/^  annotations:$$/a\    {{- with include "flotilla.crds.annotations" . }}{{ nindent 4 . }}{{- end }}' "$$f"; \
		  echo "{{- end }}"; } > "$$out"; \
		grep -q flotilla.crds.annotations "$$out" || { echo "$$f: no metadata.annotations for the chart's"; exit 1; }; \
	done
	@# The Multi-Cluster Services API's CRDs, as its module ships them (sigs.k8s.io/mcs-api, the
	@# version go.mod requires), for both roles: every cluster of the set serves ServiceExports and
	@# ServiceImports.
	@mcs=$$(go list -m -f '{{.Dir}}' sigs.k8s.io/mcs-api) && rm -rf config/crd/mcs && mkdir -p config/crd/mcs && \
	for f in $$mcs/config/crd/*.yaml; do \
		name=$$(basename "$$f" .yaml); install -m 0644 "$$f" config/crd/mcs/; out=$(CHART_CRDS)/$$name.yaml; \
		{ echo "{{- /* Generated by make generate from sigs.k8s.io/mcs-api's $$name.yaml: change the module's version in go.mod, not this file. */ -}}"; \
		  echo "{{- if include \"flotilla.crds.render\" (list . \"$${name#*_}\") }}"; echo "---"; \
		  sed -e '/^#/d' \
		      -e '/^metadata:$$/a\  annotations:\n    {{- with include "flotilla.crds.annotations" . }}{{ nindent 4 . }}{{- end }}' \
		      -e 's/^  labels:$$/  labels: {{- include "flotilla.labels" . | nindent 4 }}/' "$$f"; \
		  echo "{{- end }}"; } > "$$out"; \
		grep -q 'labels: {{- include' "$$out" || { echo "$$f: no metadata.labels for the chart's"; exit 1; }; \
	done
	go run ./hack/chartdoc -chart $(CHART)

.PHONY: verify-generated
verify-generated: generate ## Fail when generated files are not up to date
	@gen="pkg/apis config/crd $(CHART)/crds $(CHART_CRDS) $(CHART)/README.md"; \
	out=$$(git status --porcelain -- $$gen); if [[ -n "$$out" ]]; then \
		echo "$$out"; git --no-pager diff --stat -- $$gen; \
		echo "generated files changed: run make generate and commit"; exit 1; fi

.PHONY: verify
verify: ## gofmt, go vet, a tidy go.mod, docs/architecture.svg rendered from its source, every relative link of the docs, no work-log numbering
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	@go mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy"; go mod tidy -diff; exit 1; }
	@hack/docs-picture.sh --check $(PICTURE_SRC) $(PICTURE)
	@go run ./hack/doclinks
	@hack/worklog-check.sh

PICTURE_SRC := docs/architecture.dot
PICTURE := docs/architecture.svg

.PHONY: docs-picture
docs-picture: ## Render docs/architecture.dot to docs/architecture.svg (Graphviz: apt-get install graphviz)
	@hack/docs-picture.sh $(PICTURE_SRC) $(PICTURE)

.PHONY: lint
lint: ## golangci-lint with .golangci.yml (the style contract, the layers), then proof that a wrong import fails it
	$(call tools-for,lint)
	$(GOLANGCI_LINT) run ./...
	GOLANGCI_LINT=$(GOLANGCI_LINT) test/lint/layers.sh

# What the unit tests, the chart's rendering specs and the integration suites said, test by test:
# make test adds them to the e2e suite's reports in its closing line (hack/specreport -count).
UNIT_EVENTS ?= bin/unit-events.json
CHART_REPORT ?= bin/chart-report.json
INTEGRATION_REPORT ?= bin/integration-report.json

.PHONY: unit
unit: ## Unit tests (no clusters); go test's events in bin/unit-events.json
	@mkdir -p $(dir $(UNIT_EVENTS))
	go test -count=1 -json $(UNIT_PKGS) | go run ./hack/testlog $(UNIT_EVENTS)

FUZZTIME ?= 15s
FUZZ_TUNNEL_TIME ?= 10s

.PHONY: fuzz
fuzz: ## Fuzz the admission decision and the delegate translation (FUZZTIME=15s; seeds in pkg/election/fuzz_test.go), then the tunnel's hello (FUZZ_TUNNEL_TIME=10s)
	@# -trimpath: a build that names no checkout's path, so that a clean clone (CI's) finds the
	@# fuzzing build (every package instrumented) in the Go build cache any other checkout filled.
	@# The target is in the pure election package: a third of the packages the webhook links, so a
	@# cold build instruments that much less.
	go test -trimpath ./pkg/election -run '^$$' -fuzz FuzzAdmitAndDelegate -fuzztime $(FUZZTIME)
	@# The tunnel's hello, what an agent (or anyone who reaches the endpoint) sends first.
	go test -trimpath ./pkg/tunnel/hello -run '^$$' -fuzz FuzzReadHello -fuzztime $(FUZZ_TUNNEL_TIME)

.PHONY: chart
chart: ## Helm chart: helm lint --strict of both roles, and its rendering specs (every value, the schema's refusals, the alerts fire on their cases)
	$(call tools-for,kube helm ginkgo promrules)
	$(TOOLS_DIR)/helm lint --strict $(CHART) -n flotilla-system
	$(TOOLS_DIR)/helm lint --strict $(CHART) -n flotilla-system --set role=secondary
	$(GINKGO) $(GINKGO_FLAGS) --label-filter=render --json-report=$(abspath $(CHART_REPORT)) ./test/integration/chart

.PHONY: integration
integration: ## Integration suites: controllers and the webhook on real API servers (envtest with the bed's kube-apiserver and etcd; its kube-scheduler and kube-controller-manager where a spec needs them)
	$(call tools-for,bed helm ginkgo promrules)
	$(GINKGO) -v $(GINKGO_FLAGS) --timeout=15m --json-report=$(abspath $(INTEGRATION_REPORT)) ./test/integration/...

.PHONY: real-nodes
real-nodes: ## The bed's real nodes as root: the primary's, then the secondaries' with each pod network (isolated, flat), then every cluster's DNS (CoreDNS, clusterset.local), each torn down and the host checked
	$(call tools-for,bed)
	@if [ "$$(id -u)" -ne 0 ]; then echo "real-nodes: skipped: the real nodes need root (containerd, network namespaces, iptables); CI runs as root"; exit 0; fi; \
	set -e; \
	FLOTILLA_REAL_NODE=1 go test -count=1 -v -timeout 10m -run '^TestRealNode$$' ./test/testbed; \
	for net in isolated flat; do \
		echo "real-nodes: the secondaries' real nodes, pod network $$net"; \
		FLOTILLA_REAL_NODE=1 FLOTILLA_SECONDARY_POD_NETWORK=$$net go test -count=1 -v -timeout 10m -run '^TestSecondaryRealNodes$$' ./test/testbed; \
	done; \
	echo "real-nodes: the cluster DNS of every cluster with a real node"; \
	FLOTILLA_REAL_NODE=1 go test -count=1 -v -timeout 10m -run '^TestClusterDNS$$' ./test/testbed

# Ginkgo's JSON report of the last e2e run: hack/specreport reads where its time went.
E2E_REPORT ?= bin/e2e-report.json
# Ginkgo processes sharing the one bed: the specs not marked Serial spread over them, the Serial
# ones (whatever stops, freezes, cordons or restarts something shared) run after them on the first.
E2E_PROCS ?= 4
# More Ginkgo flags, e.g. E2E_FLAGS='--label-filter=!disruptive' or E2E_FLAGS='--focus="fails over"'.
E2E_FLAGS ?=
# The whole suite (no E2E_FLAGS) runs on two beds side by side: the disruptive specs that need no
# real node (and are not labelled bed-with-real-nodes, which balances the two beds' times) on a
# bed of their own without real nodes (one process, its report and log below), the
# rest on the bed with them. E2E_SPLIT=0 runs everything on the one bed.
E2E_SPLIT ?= $(if $(strip $(E2E_FLAGS)),0,1)
E2E_SIDE_FILTER := disruptive && !real-nodes && !bed-with-real-nodes
E2E_SIDE_REPORT ?= bin/e2e-report-no-real-nodes.json
E2E_SIDE_LOG ?= bin/e2e-no-real-nodes.log
# Written once the clusters of the bed without real nodes are up (its specs take longest, so it
# starts first): the other bed's set-up starts then, not beside theirs.
E2E_BED_UP := bin/e2e-bed-up

.PHONY: e2e
e2e: ## End-to-end suites: the disruptive specs that need no real node on a bed of their own, beside the rest on a bed with real nodes (E2E_PROCS=4 Ginkgo processes; E2E_SPLIT=0: one bed; E2E_FLAGS='--label-filter=...' or '--focus=...' for a part, on one bed); then each bed's set-up time and 20 slowest specs, from Ginkgo's JSON reports (E2E_REPORT=bin/e2e-report.json)
	$(call tools-for,bed tracing ginkgo cert-manager promrules csi inventory kueue previous)
	@mkdir -p $(dir $(E2E_REPORT)) && rm -f $(E2E_REPORT) $(E2E_SIDE_REPORT) $(E2E_SIDE_LOG) $(E2E_BED_UP)
	$(GINKGO) build ./test/e2e
	@status=0; side=0; side_pid=; filter=(); after=; \
	if [[ "$(E2E_SPLIT)" == 1 ]]; then \
		echo "e2e: the specs labelled '$(E2E_SIDE_FILTER)' run on a bed without real nodes, set up first, beside the rest on the other bed, set up once the first's clusters are up; their output follows the rest's (and is in $(E2E_SIDE_LOG))"; \
		FLOTILLA_E2E_REAL_NODES=0 FLOTILLA_E2E_UP_MARK=$(abspath $(E2E_BED_UP)) $(GINKGO) -v $(GINKGO_FLAGS) --procs=1 --timeout=$(E2E_TIMEOUT) --poll-progress-after=120s \
			--label-filter='$(E2E_SIDE_FILTER)' --json-report=$(abspath $(E2E_SIDE_REPORT)) ./test/e2e/e2e.test >$(E2E_SIDE_LOG) 2>&1 & side_pid=$$!; \
		filter=(--label-filter='!($(E2E_SIDE_FILTER))'); after=$(abspath $(E2E_BED_UP)); \
	fi; \
	FLOTILLA_E2E_START_AFTER=$$after $(GINKGO) -v $(GINKGO_FLAGS) --procs=$(E2E_PROCS) --timeout=$(E2E_TIMEOUT) --poll-progress-after=120s \
		--json-report=$(abspath $(E2E_REPORT)) "$${filter[@]}" $(E2E_FLAGS) ./test/e2e/e2e.test || status=$$?; \
	if [[ -n "$$side_pid" ]]; then \
		wait $$side_pid || side=$$?; \
		echo; echo "e2e: the bed without real nodes ('$(E2E_SIDE_FILTER)'), exit $$side:"; cat $(E2E_SIDE_LOG); \
	fi; \
	for r in $(E2E_REPORT) $(E2E_SIDE_REPORT); do \
		if [[ -s $$r ]]; then echo; echo "$$r:"; go run ./hack/specreport -top 20 $$r || true; fi; \
	done; \
	if [[ $$status -ne 0 ]]; then exit $$status; fi; \
	exit $$side

# The steps of make test, in order; hack/test-steps.sh times each and prints the table at the end.
# A,B+C runs the chain A then B beside C: the steps that only compute beside real-nodes, which
# mostly waits on the host's daemons (neither touches what the other uses), then tools, which
# builds what the e2e suite needs besides (Jaeger, cert-manager, the CSI stack) while the other
# chain computes: seconds when the tools cache has them, and not on the e2e step's own time when not;
# then fuzz, whose run is a fixed time: the two chains then take about as long (unit, chart and
# integration 287 s; real-nodes, tools and fuzz 253 s, warm), where fuzz in the first made it the
# longer by a fuzz run.
TEST_STEPS := verify verify-generated lint unit,chart,integration+real-nodes,tools,fuzz e2e

.PHONY: test
# The runs make test's closing line adds up: "tests: N passed, N failed, N skipped".
TEST_REPORTS := $(UNIT_EVENTS) $(CHART_REPORT) $(INTEGRATION_REPORT) $(E2E_REPORT) $(E2E_SIDE_REPORT)

test: ## Every test: verify, generated files, lint, then unit, chart and integration beside the real nodes, the remaining tools and fuzz, then e2e; then each step's time and the tests passed, failed and skipped
	@rm -f $(TEST_REPORTS)
	@MAKE="$(MAKE)" TEST_REPORTS="$(TEST_REPORTS)" hack/test-steps.sh $(TEST_STEPS)

BENCH_PODS ?= 200
BENCH_CLUSTERS ?= 2
BENCH_MEMORY_LIMIT ?= 512Mi
BENCH_SKIP_DIRECT ?= false
BENCH_SKIP_SPLIT ?= false
BENCH_RENEW_DEADLINE ?= 10s
BENCH_MCS_ENDPOINTS ?= 1000
BENCH_STEADY_RATE ?= 0
BENCH_STEADY_DURATION ?= 5m
BENCH_PULL ?= false

.PHONY: bench
bench: ## Benchmark: N pods direct in one secondary, split over the secondaries, and elected (BENCH_PODS=200, BENCH_CLUSTERS=2, BENCH_MEMORY_LIMIT=512Mi: the chart's manager limit, BENCH_SKIP_DIRECT=true: no run in one secondary, BENCH_SKIP_SPLIT=true: no split-direct floor either, BENCH_RENEW_DEADLINE=10s: the managers' leader renewal deadline, BENCH_MCS_ENDPOINTS=1000: endpoints exported from every cluster for the Multi-Cluster Services run, 0 for none, BENCH_TRACING=1: the bed with Jaeger, and the elected run again untraced and traced for the manager's tracing cost, BENCH_STEADY_RATE=20: the steady-load run, pods created one by one at 20 a second directly then elected, their startup latency percentiles, 0 for none, BENCH_STEADY_DURATION=5m: how long it creates them, BENCH_PULL=true: every secondary joined in pull mode, reached only through the tunnel of an agent); JSON in bench.json
	$(call tools-for,bed $(if $(BENCH_TRACING),tracing))
	go run ./test/bench --pods $(BENCH_PODS) --clusters $(BENCH_CLUSTERS) --memory-limit $(BENCH_MEMORY_LIMIT) --skip-direct=$(BENCH_SKIP_DIRECT) --skip-split=$(BENCH_SKIP_SPLIT) --renew-deadline $(BENCH_RENEW_DEADLINE) --mcs-endpoints $(BENCH_MCS_ENDPOINTS) $(if $(BENCH_TRACING),--tracing) --steady-rate $(BENCH_STEADY_RATE) --steady-duration $(BENCH_STEADY_DURATION) --pull=$(BENCH_PULL) --out bench.json

.PHONY: dev-up
# REAL_NODE=1 gives the primary a real node (root, Debian's containerd; make demo asks for it);
# SECONDARY_REAL_NODES=1 gives each secondary one, each in a network namespace of its own.
dev-up: ## Start a primary and two secondaries (REAL_NODE=1: a real node in the primary; SECONDARY_REAL_NODES=1: one in each secondary; TRACING=1: Jaeger, and every API server tracing into it); kubeconfig in .testbed/kubeconfig
	$(call tools-for,bed $(if $(TRACING),tracing))
	go run ./test/testbed/cmd/flotilla-testbed up --dir $(DEV_DIR) $(if $(REAL_NODE),--real-node) $(if $(SECONDARY_REAL_NODES),--secondary-real-nodes) $(if $(TRACING),--tracing)

.PHONY: dev-down
dev-down: ## Stop the manager and every cluster dev-up or demo started
	@test/demo/manager.sh stop $(DEV_DIR)
	go run ./test/testbed/cmd/flotilla-testbed down --dir $(DEV_DIR)

.PHONY: demo
demo: REAL_NODE = 1
demo: SECONDARY_REAL_NODES = 1
demo: build dev-up ## Build, start the bed (with real nodes in every cluster where the host allows), install the chart in every cluster (the manager in cluster there), join, show them
	@KUBECTL=$(KUBECTL) HELM=$(TOOLS_DIR)/helm test/demo/demo.sh $(DEV_DIR)

.PHONY: clean
clean: ## Remove build outputs (not the tools cache, not a running bed)
	rm -rf bin
