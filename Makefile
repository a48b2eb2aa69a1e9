# quotakit's one test command is `make test`: it checks formatting, vets and
# race-tests every module in the repository (the library and each nested
# module found by its go.mod), then runs every fuzz target briefly.

GO       ?= go
FUZZTIME ?= 10s
MODULES  := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)

.PHONY: test fmt vet unit fuzz bench

test: fmt vet unit fuzz

# fmt fails when any Go file is not gofmt-clean.
fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do echo "go vet $$m"; (cd $$m && $(GO) vet ./...); done

unit:
	@set -e; for m in $(MODULES); do echo "go test -race $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done

# fuzz runs each fuzz target of the library for FUZZTIME.
fuzz:
	@FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

# bench runs the side-by-side benchmarks against client-go and upstream quota.
bench:
	cd bench && $(GO) test -run='^$$' -bench=. -benchmem ./...
