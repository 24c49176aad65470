# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# One set of pattern rules over the module list in versions.yaml; nothing is
# written out per module. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
MODULES := $(shell hack/modules.sh)
PROVISIONERS := $(filter-out lib,$(MODULES))
GO_MODULES := $(MODULES) test
# Outside go.work on purpose: third-party-style ports, built with GOWORK=off.
STANDALONE := $(shell hack/modules.sh --standalone)
GO_TEST_FLAGS ?= -race
INTEGRATION_TIMEOUT ?= 40m
# Fuzz targets make test runs beyond their seeds, each for FUZZ_TIME:
# module/package:target.
FUZZ_TARGETS := lib/internal/cachedecode:FuzzSettledDecoding lib/controller:FuzzGate
FUZZ_TIME ?= 20s

.DEFAULT_GOAL := help
# charts/common is the library the others depend on: packaged inside each.
CHARTS := $(filter-out common,$(notdir $(wildcard charts/*)))

.PHONY: help tags chart build test test-phases prepare test-unit test-fuzz test-integration test-oldest test-csi-process test-fresh test-faults test-stress test-e2e deps deps-node controlplane node cluster lint tidy verify demo bench image push clean

help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9/%_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 24

build: $(GO_MODULES:%=build/%) ## Build every module and the provisioner binaries (into _output/bin).
build/%:
	cd $* && go build ./...
	@if [ -f $*/Makefile ]; then $(MAKE) --no-print-directory -C $* build; fi

# The phases of `make test`, in order; .ci/run runs and times them one by one.
TEST_PHASES := prepare test-unit test-fuzz test-integration test-oldest test-csi-process test-fresh
# The oldest supported Kubernetes (hack/lib/versions.sh); test-integration runs
# the newest.
KUBE_OLDEST := $(shell source hack/lib/versions.sh && echo "$$K8S_OLDEST_VERSION")
# The suites test-oldest runs again on it: the library's, csi's and, on real
# nodes, the hostpath case that follows hostpath/README.md.
OLDEST_SUITES := ./integration/lib/ ./integration/csi/
OLDEST_E2E := ^TestHostpathSingleNode$$

test: ## Everything CI runs: install test dependencies and build the control plane (in parallel), then run all tests.
	@hack/phases.sh $(TEST_PHASES)

test-phases: ## Print the phases of make test, in order.
	@echo $(TEST_PHASES)

prepare: ## Install the Debian packages of every test backend while the control plane and node components build (hack/prepare-test.sh).
	hack/prepare-test.sh

test-unit: $(MODULES:%=test/%) ## Unit tests of every released module.
test/%:
	cd $* && go test $(GO_TEST_FLAGS) -count=1 ./...

test-fuzz: ## Fuzz each of FUZZ_TARGETS for FUZZ_TIME (beyond the seeds every go test runs); a failure is saved under the package's testdata/fuzz.
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; module=$${pkg%%/*}; \
	  echo "[fuzz] $$t for $(FUZZ_TIME)"; \
	  (cd $$module && go test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZ_TIME) -parallel 1 ./$${pkg#*/}); \
	done

test-integration: controlplane node ## Integration tests against the real control plane and backends, and the e2e suite on real nodes (test/e2e, test/cluster).
	cd test && go test -count=1 -timeout $(INTEGRATION_TIMEOUT) ./...

test-oldest: ## The lib and csi integration suites and the e2e hostpath case again, on the oldest supported Kubernetes (KUBE_OLDEST; root for the nodes).
	KUBEPROV_KUBE_VERSION=$(KUBE_OLDEST) hack/controlplane.sh
	KUBEPROV_KUBE_VERSION=$(KUBE_OLDEST) hack/node.sh
	cd test && KUBEPROV_KUBE_VERSION=$(KUBE_OLDEST) go test -count=1 -timeout $(INTEGRATION_TIMEOUT) $(OLDEST_SUITES)
	cd test && KUBEPROV_KUBE_VERSION=$(KUBE_OLDEST) go test -count=1 -timeout $(INTEGRATION_TIMEOUT) -run '$(OLDEST_E2E)' ./e2e/

test-csi-process: controlplane ## The csi integration tests again, the CSI driver a process of its own with its volumes on disk, killed and restarted (CSI_TEST_DRIVER=process).
	cd test && CSI_TEST_DRIVER=process go test -count=1 -timeout $(INTEGRATION_TIMEOUT) ./integration/csi/

test-fresh: ## make demo on a root filesystem holding only a new machine's packages, with the built caches bind-mounted (hack/fresh-machine.sh; root).
	hack/fresh-machine.sh

test-faults: controlplane ## Only the fault suite (test/faults): kills, restarts and outages across all provisioners.
	cd test && go test -count=1 -timeout $(INTEGRATION_TIMEOUT) -v ./faults/

test-stress: controlplane ## One test package N times under busy loops on every core, then each run's failures: make test-stress PKG=./integration/flex/ N=5 [RUN=regexp] (hack/stress.sh).
	@[ -n "$(PKG)" ] || { echo "usage: make test-stress PKG=./integration/<pkg>/ N=5" >&2; exit 2; }
	RUN='$(RUN)' hack/stress.sh $(PKG) $(or $(N),5)

test-e2e: controlplane node ## Only the e2e suite: provisioners installed as users do, on a cluster with real nodes (root).
	cd test && go test -count=1 -timeout $(INTEGRATION_TIMEOUT) -v ./cluster/ ./e2e/

deps: ## Install the Debian packages the tests need (root; idempotent).
	hack/install-test-deps.sh

deps-node: ## Install the Debian packages a real node needs: runc, busybox-static, ... (hack/deps/node.sh; root; idempotent). make demo and make cluster run it.
	hack/deps/node.sh

controlplane: ## Build etcd, kube-apiserver and kube-controller-manager into the cache (see docs/development.md).
	hack/controlplane.sh

node: ## Build kubelet, kube-scheduler, containerd and the CNI plugins into the cache (hack/node.sh).
	hack/node.sh

cluster: deps-node controlplane node ## A cluster with real nodes (root) until Ctrl-C, with a KUBECONFIG printed: make cluster NODES=2.
	cd test && go run ./cmd/cluster $(if $(NODES),--nodes=$(NODES))

demo: deps-node ## The main job: a cluster with a real node; hostpath-provisioner installed as its README says, a pod writes into a claim (KEEP=1 leaves it running).
	@echo "Compiling the demo (a few minutes the first time; the cluster it starts builds its components from source the first time too: about 20 min)..."
	cd test && go run ./cmd/demo $(if $(KEEP),--keep)

bench: controlplane ## Provisioning benchmark on the real control plane (N=1000 claims; see docs/performance.md).
	cd test && go run ./bench $(BENCH_ARGS)

tidy: $(GO_MODULES:%=tidy/%) $(STANDALONE:%=tidy/%) ## go mod tidy every module.
tidy/%:
	cd $* && GOWORK=off go mod tidy

tags: ## Create the release tags releases.yaml lists that this clone lacks (tags are not cloned); refuse tags pointing elsewhere (hack/tags.sh).
	hack/tags.sh

verify: ## gofmt, vet (workspace and GOWORK=off), tidy-clean, go.work up to date, license headers, shellcheck.
	hack/verify.sh

lint: ## golangci-lint v2 (pinned in hack/tools) over every module, the build tools included.
	hack/lint.sh $(GO_MODULES)
	GOWORK=off hack/lint.sh $(STANDALONE) hack/tools

image: $(PROVISIONERS:%=image/%) ## OCI images of every provisioner, without a Docker engine.
image/%:
	$(MAKE) --no-print-directory -C $* image

push: $(PROVISIONERS:%=push/%) ## Push every image: make push REGISTRY=host/namespace TAG=tag
push/%:
	$(MAKE) --no-print-directory -C $* push

chart: $(CHARTS:%=chart/%) ## Package every Helm chart (charts/) into _output/charts, versioned from its module's release tag (hack/version.sh).
# The chart charts/<module>[-<mode>] takes its versions from <module>'s tag:
# version without the v, appVersion (the default image tag) as make push tags.
chart/%:
	@version=$$(hack/version.sh $(firstword $(subst -, ,$*))) && \
	cd test && go run ./cmd/chart --version "$${version#v}" --app-version "$$version" --out ../_output/charts ../charts/$*

clean: ## Remove build outputs (not the control-plane cache: see docs/development.md).
	rm -rf _output
