# gpushare — see README.md. Targets stay thin; the work is in hack/ and the Go packages.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c

GO        ?= go
BIN       ?= $(CURDIR)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The release version: the tag of the images `make image` builds and deploy/ references.
IMAGE_TAG ?= $(shell cat $(CURDIR)/VERSION)
LDFLAGS   := -s -w -X github.com/gpushare/gpushare/pkg/version.Version=$(VERSION)
# Packages with concurrency run under the race detector.
RACE_PKGS := ./pkg/cache/... ./pkg/routes/... ./pkg/binding/... ./pkg/deviceplugin/... ./pkg/dra/... ./pkg/nodecards/... ./pkg/limithook/... ./pkg/mps/... ./pkg/watchdog/... ./pkg/inspect/... ./pkg/serving/... ./pkg/leader/... ./internal/bench/parallel/... ./pkg/schedulerplugin/... ./internal/broadcast/...
COMMANDS  := extender share-plugin gpushare-limit-hook gpushare-mps gpushare-probe kubectl-inspect-gpushare
# Benchmark tools (internal/bench/cmd/*), built into ./bin beside the product commands.
BENCH_COMMANDS := $(wildcard internal/bench/cmd/*)
# share-plugin and gpushare-limit-hook reach the driver's NVML through cgo (go-nvml dlopens libnvidia-ml at run time,
# so nothing links against the driver). Without a C compiler it is built with CGO_ENABLED=0:
# simulated GPUs still work and real NVML is refused with a clear message.
NVML_CGO  ?= $(shell command -v gcc >/dev/null 2>&1 && echo 1 || echo 0)
# go.work is for editors: every target builds and tests each module on its own go.mod.
export GOWORK := off
# gpushare-scheduler is a module of its own (it pulls in k8s.io/kubernetes); its --version
# and /version report the kube-scheduler it is built from.
SCHED_MOD := cmd/gpushare-scheduler
SCHED_K8S := $(shell sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\)$$/\1/p' $(SCHED_MOD)/go.mod)
SCHED_LDFLAGS := $(LDFLAGS) -X k8s.io/component-base/version.gitVersion=$(SCHED_K8S) \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(SCHED_K8S)))
# go-nvml's header marks some NVML calls deprecated; gcc would warn about each of them.
CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_CFLAGS

.PHONY: all build test unit race e2e lint verify fmt demo demo-down demo-test k8s-bins images image dist clean chart-docs doctor

all: build

build: ## Build every command into ./bin
	@mkdir -p $(BIN)
	@for d in $(addprefix cmd/,$(COMMANDS) $(EXTRA_COMMANDS)) $(BENCH_COMMANDS); do \
	  c=$${d##*/}; cgo=0; case $$c in share-plugin|gpushare-limit-hook) cgo=$(NVML_CGO);; esac; \
	  if [ -d $$d ]; then echo "go build $$d (CGO_ENABLED=$$cgo)"; CGO_ENABLED=$$cgo $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/$$c ./$$d; fi; \
	done
	@# A module of its own (it pulls in k8s.io/kubernetes), outside the workspace.
	@echo "go build cmd/gpushare-scheduler (CGO_ENABLED=0)"
	@cd $(SCHED_MOD) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(SCHED_LDFLAGS)" -o $(BIN)/gpushare-scheduler .

test: doctor lint unit race demo-test e2e ## What .ci/run runs: the host check, lint, unit tests, race tests, the demo as a user runs it, e2e on the local cluster

doctor: ## Say which host tools are missing and how to install them (as root: install them with apt-get)
	hack/doctor.sh

# The chart tests (test/manifests) and the chart e2e run the pinned helm, built once; a
# failed build stops the target (errexit) rather than letting those tests skip.
WITH_HELM = h=$$(hack/tools.sh helm); GPUSHARE_HELM=$$h

unit:
	$(WITH_HELM) $(GO) test -count=1 ./...

race:
	$(GO) test -count=1 -race $(RACE_PKGS)

lint: ## go vet + gofmt check + import rules (test/imports) + no product function over 80 lines (test/funclen) + shellcheck of hack/ and deploy/ + no committed binaries
	$(GO) vet ./...
	@# The back ends never import each other, the node layer neither, only pkg/nvml imports go-nvml.
	$(GO) test -count=1 ./test/imports/
	@# No function of cmd/, pkg/ or internal/ (tests aside) is over 80 lines.
	$(GO) test -count=1 ./test/funclen/
	@# CGO_ENABLED=0 as make build builds it: vet then reuses the same compiled dependencies.
	cd $(SCHED_MOD) && CGO_ENABLED=0 $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@# A build output committed by mistake is downloaded by every clone: no tracked file is an ELF binary.
	@bad=$$(git ls-files -z | while IFS= read -r -d '' f; do [ -f "$$f" ] && [ "$$(head -c4 "$$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] && echo "$$f"; done; true); \
	  if [ -n "$$bad" ]; then echo "binaries tracked by git (git rm --cached them and ignore their path):"; echo "$$bad"; exit 1; fi
	hack/shellcheck.sh

verify: lint

fmt:
	gofmt -w $$(git ls-files '*.go')

chart-docs: ## Rewrite the values table of deploy/helm/gpushare/README.md from values.yaml
	$(GO) run ./hack/chartdocs

k8s-bins: ## Build (once) the pinned control-plane binaries into the cache
	hack/build-k8s.sh

# --- local cluster (hack/, docs/local-cluster.md) ---------------------------------------------
E2E_TIMEOUT ?= 45m
E2E_FLAGS   ?=

images: ## Build the local test images (gpuenv, pause) as docker-save tarballs in _output/images
	hack/build-images.sh

image: build ## Pack bin/extender, bin/gpushare-scheduler and bin/share-plugin into image tarballs in _output/images, tagged $(IMAGE_TAG)
	IMAGE_TAG=$(IMAGE_TAG) hack/build-component-images.sh

dist: ## Release artefacts in dist/ with goreleaser: binaries per platform, the kubectl plugin's archives + sha256 + krew manifest, image tarballs; RELEASE=1 at the VERSION tag
	RELEASE=$(or $(RELEASE),0) hack/dist.sh

# Who places GPU-sharing pods on the local cluster and in the benchmarks: extender
# (kube-scheduler + the gpushare extender) or plugin (gpushare-scheduler).
MODE ?= extender

# Which back end serves the local cluster's real node in the demo: device-plugin
# (aliyun.com/gpu-mem) or dra (ResourceClaims).
BACKEND ?= device-plugin

demo: doctor k8s-bins build images ## Start the local cluster and run the reference scenario (three notebooks on one T4); MODE=extender|plugin BACKEND=device-plugin|dra
	GPUSHARE_MODE=$(MODE) GPUSHARE_BACKEND=$(BACKEND) hack/demo.sh

demo-down: ## Stop the demo cluster: every process by PID, mounts, cni0, cgroups
	hack/cluster-down.sh

DEMO_TIMEOUT ?= 45m

demo-test: ## make demo as a new user runs it (host tools only on PATH), again, MODE=plugin, BACKEND=dra; then kubectl from the printed exports; takes the demo cluster down
	$(GO) test -tags demo -count=1 -v -timeout $(DEMO_TIMEOUT) ./test/demo/...

e2e: ## End-to-end suite on its own local cluster (builds what it needs; takes down a running demo)
	$(WITH_HELM) $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) ./test/e2e/... $(E2E_FLAGS)

clean:
	rm -rf $(BIN) dist

.PHONY: bench-scale
bench-scale: ## Scale benchmark: N=5000 nodes, PODS=2000; scheduler alone vs with the extender, burst, memory; MODE=plugin: vs gpushare-scheduler in ROUNDS=5 alternating rounds [POLICY=binpack]; MODE=dra: DRA claims via kube-scheduler vs gpushare-scheduler [DRA_PLUGIN=yes ROUNDS=3]
	MODE=$(MODE) N=$(or $(N),5000) PODS=$(or $(PODS),2000) hack/bench/scale.sh

.PHONY: bench-replay
bench-replay: ## Trace replay: TRACE=default POLICY=binpack SEED=42 [MODE=extender|plugin|dra|dra-plugin TUNE=1.3 LIMIT=0 STOP_AT=0 UNIT=milli]; kwok-only cluster, results in _output/replay
	MODE=$(MODE) TRACE=$(or $(TRACE),default) POLICY=$(or $(POLICY),binpack) SEED=$(or $(SEED),42) hack/bench/replay.sh

.PHONY: bench-families
bench-families: ## The 13 trace families offline, seeds 42-51 [POLICY=fgd ROOT BOUND=no]: families-<policy>.md and .svg beside FGD's published figures (and the bound: BOUND=yes or make bench-bound) in _output/replay-families-<commit>
	OFFLINE=yes POLICIES=$(or $(POLICY),fgd) TRACES=families SEEDS=42-51 BOUND=$(or $(BOUND),no) \
		ROOT=$(or $(ROOT),$(CURDIR)/_output/replay-families-$(shell git rev-parse --short HEAD)) hack/bench/replay-matrix.sh

.PHONY: bench-bound
bench-bound: ## The bound (least unallocated GPU % any scheduler can reach, bounded) of the 13 trace families, seeds 42-51, no cluster [TRACES SEEDS ROOT]; with bench-families' results when in the same ROOT
	ROOT=$(or $(ROOT),$(CURDIR)/_output/replay-families-$(shell git rev-parse --short HEAD)) hack/bench/bound.sh

.PHONY: bench-churn
bench-churn: ## Offline replay under churn (pods leave after their run time, FIFO pending queue): [FAMILY=<one family; default all 13> POLICY=<one scheduler; default binpack fgd kube-scheduler-dra fgd-dra> SEED=42]; churn.md and churn-default.svg in _output/replay-churn
	$(if $(FAMILY),FAMILIES=$(FAMILY)) $(if $(POLICY),SCHEDULERS="$(POLICY)") hack/bench/churn.sh

.PHONY: bench-churn-cluster
bench-churn-cluster: ## Replay under churn through the real scheduler on a kwok cluster: [MODE=extender|plugin TRACE=default POLICY=fgd SEED=42 DRAIN=2m]; churn.json and churn-series.csv in _output/replay-churn-cluster
	CHURN=yes MODE=$(MODE) TRACE=$(or $(TRACE),default) POLICY=$(or $(POLICY),fgd) SEED=$(or $(SEED),42) hack/bench/replay.sh

.PHONY: bench-replay-matrix
bench-replay-matrix: ## Policies × traces × seeds: [MODE=extender|plugin POLICIES TRACES SEEDS STOP_AT=100 OFFLINE=no BOUND=yes]; table.md, charts and family tables with the bound in _output/replay-matrix
	MODE=$(MODE) hack/bench/replay-matrix.sh
