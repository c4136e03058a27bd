# servetune: see README.md. Every target works from a fresh clone with Go and gcc.
GO      ?= go
BIN     ?= bin/servetune
PKGS    := ./...
# go-nvml's cgo preamble warns about deprecated NVML calls it wraps; those are not ours.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_ENABLED = 1

.PHONY: all build test lint bench run sim-image sampler-bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/servetune

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

test: lint
	$(GO) test -count=1 -timeout 20m $(PKGS)

# Go benchmarks for hot paths (SSE parser, client loop, simulator).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The simulated engine as a Docker image (FROM scratch, static binary), a
# drop-in for vllm/vllm-openai in the Docker launcher and its tests.
SIM_IMAGE ?= servetune-sim:dev
sim-image:
	SIM_IMAGE=$(SIM_IMAGE) GO=$(GO) ./scripts/sim-image.sh

clean:
	rm -rf bin .servetune
