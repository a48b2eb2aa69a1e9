# quotakit's one test command is `make test`: it checks formatting, vets
# every module in the repository (the library and each nested module found
# by its go.mod), race-tests them (bench's differential tests without
# -race, see below), runs the end-to-end tests against a real
# kube-apiserver and etcd, then runs every fuzz target briefly.

GO       ?= go
FUZZTIME ?= 10s
MODULES  := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
# The e2e module is vetted with the others but tested by its own target,
# once, with the time its first run needs. The bench module's tests (the
# differential tests against Kubernetes) run without -race: the race build
# of Kubernetes' packages would be a second compile of what e2e builds for
# kube-apiserver, about ten minutes of two cores with an empty cache, and
# the library they exercise is race-tested in its own module.
UNIT_MODULES := $(filter-out ./e2e ./bench,$(MODULES))
E2E_TIMEOUT  ?= 50m

.PHONY: test fmt vet unit e2e fuzz bench controller image image-tag

# VERSION is stamped into quotakit-controller (-version prints it) and is
# the tag of its image in the manifests; IMAGE is the image's name.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
IMAGE   ?= quotakit-controller

test: fmt vet unit e2e fuzz

# fmt fails when any Go file is not gofmt-clean.
fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do echo "go vet $$m"; (cd $$m && $(GO) vet ./...); done

unit:
	@set -e; for m in $(UNIT_MODULES); do echo "go test -race $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done
	cd bench && $(GO) test -count=1 ./...

# e2e runs the end-to-end tests in e2e/: their TestMain builds etcd,
# kube-apiserver and kube-controller-manager (the reference of the churn
# test) from the Go module proxy (about 20 minutes of two cores
# with an empty build cache, seconds once it is warm; at nice 19, and
# without -race, which applies to the tests only), starts them on
# loopback and stops them by process id when the tests end. Hence the
# long timeout: the first build runs inside the test binary.
e2e:
	cd e2e && $(GO) test -race -count=1 -timeout=$(E2E_TIMEOUT) ./...

# fuzz runs each fuzz target of the library for FUZZTIME.
fuzz:
	@FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

# bench runs the side-by-side benchmarks against client-go and upstream quota.
bench:
	cd bench && $(GO) test -run='^$$' -bench=. -benchmem ./...

# controller builds kube/bin/quotakit-controller, static and stamped with
# VERSION, for the image, from the command's own module (its go.mod holds
# k8s.io/apiserver, which its metrics filter needs and kube's users must
# not inherit).
controller:
	cd kube/cmd/quotakit-controller && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.stampedVersion=$(VERSION)" -o ../../bin/quotakit-controller .

# image-tag names IMAGE:VERSION in the manifests of every Deployment, as
# `kustomize edit set image` would.
image-tag:
	@for k in kube/deploy/default/kustomization.yaml kube/deploy/webhook/kustomization.yaml; do \
	  sed -i.bak -E 's|^(  newName: ).*|\1$(IMAGE)|; s|^(  newTag: ).*|\1$(VERSION)|' $$k && rm -f $$k.bak; done

# image builds the image IMAGE:VERSION from kube/Dockerfile, which holds
# the stamped binary alone, and names it in the manifests. It needs a
# container daemon (docker, or podman with DOCKER=podman).
DOCKER ?= docker
image: controller image-tag
	$(DOCKER) build -f kube/Dockerfile -t $(IMAGE):$(VERSION) .
