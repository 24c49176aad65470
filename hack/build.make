# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Build, image and push rules shared by every provisioner. A provisioner's
# Makefile is exactly:
#
#   BINARY := <binary name>
#   include ../hack/build.make
#
# with its main package in cmd/$(BINARY). `make help` in that directory lists
# the targets; docs/releasing.md explains versions, images and pushes.
#
# An image that needs OS tools (nfs: NFS-Ganesha) also sets, before the
# include, the Debian packages to lay under the binary (hack/debian-rootfs.sh
# builds that root filesystem without a container engine):
#
#   DEBIAN_PACKAGES := <packages>      # with their dependencies
#   DEBIAN_EXCLUDE  := <packages>      # dependencies never taken
#   DEBIAN_USERS    := NAME:UID:GID[:HOME] ...  # made by maintainer scripts
#   IMAGE_USER      := UID:GID         # default 65532:65532
#   IMAGE_EXPOSE    := PORT/PROTO ...  # as EXPOSE
#   IMAGE_VOLUMES   := DIR ...         # as VOLUME
# Variables are overridden on the command line: make push REGISTRY=... TAG=...

ifndef BINARY
$(error set BINARY := <binary name> before including build.make)
endif

SHELL := /usr/bin/env bash -o pipefail
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
# The module directory names the tags: hostpath/v0.2.0.
MODULE_DIR := $(notdir $(CURDIR))
OUTPUT := $(ROOT)/_output

# Computed once (a plain ?= would run git on every use).
ifeq ($(origin VERSION),undefined)
VERSION := $(shell $(ROOT)/hack/version.sh $(MODULE_DIR))
endif
ifeq ($(origin REVISION),undefined)
REVISION := $(shell git -C $(ROOT) rev-parse HEAD 2>/dev/null || echo unknown)
endif
# Image timestamps are the commit time, so that rebuilding a commit gives the
# same digests.
ifeq ($(origin SOURCE_DATE_EPOCH),undefined)
SOURCE_DATE_EPOCH := $(shell git -C $(ROOT) log -1 --format=%ct 2>/dev/null || echo 0)
endif
REGISTRY ?= ghcr.io/kubeprov
# Tags cannot hold "+": v0.0.0-dev+abc1234 is tagged v0.0.0-dev-abc1234.
TAG ?= $(subst +,-,$(VERSION))
IMAGE ?= $(REGISTRY)/$(BINARY)
# Every platform the upstream provisioners' images cover (arm/v7: k3s on a
# Raspberry Pi); docs/releasing.md lists them.
PLATFORMS ?= linux/amd64 linux/arm64 linux/arm/v7 linux/ppc64le linux/s390x linux/riscv64
SOURCE_URL ?= https://github.com/kubeprov/external-storage

VERSION_PKG := github.com/kubeprov/external-storage/lib/version
LDFLAGS := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION)
# Static, reproducible binaries built from the module alone (as released,
# without go.work). The same flags for every target keep the build cache warm.
# On a release tag go.mod requires lib by version with no replace
# (hack/release.sh): lib then comes from the repository's tags, zipped as a
# proxy serves them (hack/modproxy.sh; evaluated only when a target builds).
# Everywhere else the replace builds against ../lib.
LIB_BY_VERSION_ENV = $(if $(shell grep -qs '^replace github.com/kubeprov/external-storage/lib =>' go.mod && echo replaced),,$(shell $(ROOT)/hack/modproxy.sh))
GO_BUILD = CGO_ENABLED=0 GOWORK=off $(LIB_BY_VERSION_ENV) go build -trimpath -ldflags '$(LDFLAGS)'

BIN := $(OUTPUT)/bin/$(BINARY)
LAYOUT := $(OUTPUT)/images/$(BINARY)
# Cached outside the clone under a hash of its sources (hack/tools.sh).
IMAGEBUILD := $(shell $(ROOT)/hack/tools.sh --path imagebuild)
# linux/arm64 -> $(OUTPUT)/bin/linux_arm64/$(BINARY)
platform_bin = $(OUTPUT)/bin/$(subst /,_,$(1))/$(BINARY)
comma := ,
space := $(subst ,, )

.DEFAULT_GOAL := build
.PHONY: help build binaries image push version image-ref

help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9/%_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 12

build: ## Static binary for this machine into _output/bin/$(BINARY).
	$(GO_BUILD) -o $(BIN) ./cmd/$(BINARY)

binaries: $(foreach p,$(PLATFORMS),binary/$(p)) ## Static binaries for every platform in PLATFORMS.

# linux/arm/v7: GOARM=7, the variant the index names.
binary/%:
	GOOS=$(word 1,$(subst /, ,$*)) GOARCH=$(word 2,$(subst /, ,$*)) $(if $(word 3,$(subst /, ,$*)),GOARM=$(patsubst v%,%,$(word 3,$(subst /, ,$*)))) \
	  $(GO_BUILD) -o $(call platform_bin,$*) ./cmd/$(BINARY)

$(IMAGEBUILD):
	$(ROOT)/hack/tools.sh imagebuild

# The image's configuration beyond the binary (see the top of this file).
IMAGE_FLAGS := $(if $(IMAGE_USER),-user $(IMAGE_USER)) $(foreach p,$(IMAGE_EXPOSE),-expose $(p)) $(foreach v,$(IMAGE_VOLUMES),-volume $(v))
# linux/arm64 -> $(OUTPUT)/rootfs/$(BINARY)/linux_arm64.tar.gz
platform_rootfs = $(OUTPUT)/rootfs/$(BINARY)/$(subst /,_,$(1)).tar.gz
# Debian's name of a platform's architecture.
debian_arch = $(or $(filter amd64 arm64 armhf riscv64 s390x ppc64el,$(subst arm/v7,armhf,$(subst ppc64le,ppc64el,$(patsubst linux/%,%,$(1))))),$(error no Debian architecture for $(1)))
# The Debian release the packages come from, per architecture: Debian 12
# has no riscv64 port, Debian 13 has.
DEBIAN_SUITE ?= bookworm
DEBIAN_SUITE_riscv64 ?= trixie
debian_suite = $(or $(DEBIAN_SUITE_$(call debian_arch,$(1))),$(DEBIAN_SUITE))

ifneq ($(DEBIAN_PACKAGES),)
.PHONY: rootfs
rootfs: $(foreach p,$(PLATFORMS),rootfs/$(p)) ## Only for images that set DEBIAN_PACKAGES: their Debian root filesystems (cached; DEBIAN_REFRESH=1 re-reads the indexes).

# Always run: the script resolves the packages (seconds) and reuses the
# root filesystem cached for exactly those versions.
rootfs/%: $(IMAGEBUILD)
	DEBIAN_SUITE=$(call debian_suite,$*) $(ROOT)/hack/debian-rootfs.sh -a $(call debian_arch,$*) -o $(call platform_rootfs,$*) -i $(IMAGEBUILD) \
	  -x '$(subst $(space),$(comma),$(strip $(DEBIAN_EXCLUDE)))' $(foreach u,$(DEBIAN_USERS),-u $(u)) $(DEBIAN_PACKAGES)
endif

ifneq ($(DEBIAN_PACKAGES),)
# Each platform's image is labelled with the Debian suites its packages came
# from (a suite whose index did not verify is left out: hack/debian-rootfs.sh).
IMAGE_FLAGS += $(foreach p,$(PLATFORMS),-rootfs $(p)=$(call platform_rootfs,$(p)) \
  -platform-label $(p)=io.kubeprov.debian.suites=$$(cat $(patsubst %.tar.gz,%.suites,$(call platform_rootfs,$(p)))))
image: rootfs
endif

# Each platform's SBOM and provenance (docs/releasing.md#sbom-and-provenance)
# record who built it (BUILDER_ID: set it in CI) and this make invocation.
BUILDER_ID ?= $(SOURCE_URL)/hack/build.make
PROVENANCE_VARS := MODULE_DIR VERSION REVISION TAG IMAGE PLATFORMS SOURCE_DATE_EPOCH DEBIAN_PACKAGES DEBIAN_EXCLUDE
IMAGE_FLAGS += -builder-id '$(BUILDER_ID)' -goals '$(or $(MAKECMDGOALS),$(.DEFAULT_GOAL))' \
  $(foreach v,$(PROVENANCE_VARS),$(if $(strip $($(v))),-param '$(v)=$(strip $($(v)))'))

image: binaries $(IMAGEBUILD) ## OCI image index (all PLATFORMS) into _output/images/$(BINARY), without a container engine.
	$(IMAGEBUILD) build -name $(BINARY) -o $(LAYOUT) \
	  -version $(VERSION) -revision $(REVISION) -source $(SOURCE_URL) -tag $(TAG) -created $(SOURCE_DATE_EPOCH) \
	  $(foreach p,$(PLATFORMS),-binary $(p)=$(call platform_bin,$(p))) $(IMAGE_FLAGS)

push: image $(IMAGEBUILD) ## Push the image: make push REGISTRY=host/namespace TAG=tag (defaults ghcr.io/kubeprov, the version).
	$(IMAGEBUILD) push -layout $(LAYOUT) -ref $(IMAGE):$(TAG)

version: ## Print the version stamped into the binary.
	@echo $(VERSION)

image-ref: ## Print the image reference make push writes.
	@echo $(IMAGE):$(TAG)
