# servetune: see README.md. Every target works from a fresh clone with Go and gcc.
GO      ?= go
BIN     ?= bin/servetune
FUZZTIME ?= 30s
PKGS    := ./...
# go-nvml's cgo preamble warns about deprecated NVML calls it wraps; those are not ours.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_ENABLED = 1

.PHONY: all build install test lint bench run sim-image sampler-bench guided-bench whatif-bench trace-bench fidelity fuzz soak clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/servetune

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# Packages are built in parallel but tested one at a time (-p 1 after the
# build): the client's timing-accuracy tests and the Docker tests must not
# share this 2-core budget with another package's load.
test: lint
	$(GO) test -count=1 -run '^$$' $(PKGS) >/dev/null
	$(GO) test -count=1 -p 1 -timeout 20m $(PKGS)
	$(MAKE) fidelity

# Go benchmarks for hot paths (SSE parser, client loop, simulator).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The simulated engine as a Docker image (FROM scratch, static binary), a
# drop-in for vllm/vllm-openai in the Docker launcher and its tests.
SIM_IMAGE ?= servetune-sim:dev
sim-image:
	SIM_IMAGE=$(SIM_IMAGE) GO=$(GO) ./scripts/sim-image.sh

# The quick start: tune Llama-3.1-8B on two simulated H100s (virtual time)
# and print the recommended serve command. The study is stored afresh in the
# default database (.servetune/servetune.db, ignored), where `servetune
# studies`, `trials quickstart` and `recommend quickstart` find it.
run: build
	./$(BIN) tune examples/quickstart.yaml --fresh
	@echo
	./$(BIN) recommend quickstart --prefer cost

# servetune on your PATH ($(shell $(GO) env GOPATH)/bin).
install:
	$(GO) install ./cmd/servetune

# How many trials TPE and random search need to reach 99% of the exhaustive
# optimum of examples/sampler-bench.yaml (median of 30 seeds, virtual time).
sampler-bench:
	$(GO) build -o bin/samplerbench ./cmd/samplerbench
	./bin/samplerbench examples/sampler-bench.yaml

# Real trials (launches) the guided sampler, TPE and random search need to
# reach 99% of the optimum of 10 perturbed "realities" of
# examples/guided-bench.yaml (the simulated engine with every constant moved
# by up to ±30%), then of 10 structural ones (the same, each also deviating
# from the model in kind: tuner/samplerbench, StructuralKinds), and the
# engines that did not start for memory. One line per set (medians and the
# guided sampler's 90th percentile to 3 significant digits):
# guided-bench: guided=N tpe=M random=R p90_guided=P oom_launches_guided=A oom_launches_tpe=B
# guided-bench structural: guided=N tpe=M random=R p90_guided=P oom_launches_guided=A oom_launches_tpe=B
# Each reality takes minutes on 2 cores; run a part with e.g.
# GUIDED_BENCH_ARGS='-sets structural -from 6 -realities 5'.
GUIDED_BENCH_ARGS ?=
guided-bench:
	$(GO) build -o bin/guidedbench ./cmd/guidedbench
	./bin/guidedbench $(GUIDED_BENCH_ARGS) examples/guided-bench.yaml

# The send lateness (actual minus intended send time) of a trace replayed at
# 1,000 requests/s through the benchmark client to a loopback HTTP server
# (BenchmarkTraceReplay1000rps, ./internal/load/bench): the goal is a median
# under 1 ms and a p99 under 5 ms. The machine's load average is printed
# beside it: on a loaded machine the p99 passes 5 ms.
trace-bench:
	@$(GO) test -run '^$$' -bench TraceReplay1000rps -benchtime 1x -count 1 ./internal/load/bench/ | \
	awk -v load="$$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)" '/^BenchmarkTraceReplay/ { \
		for (i = 2; i <= NF; i++) { if ($$i == "median-late-ms") m = $$(i-1); if ($$i == "p99-late-ms") p = $$(i-1) } } \
		END { if (m == "") { print "trace-bench: the benchmark did not run"; exit 1 } \
		printf "trace-bench: 1000 req/s over loopback: send lateness median %s ms, p99 %s ms (goal < 1, < 5); load average %s on %d CPUs\n", m, p, load, '"$$(nproc)"' }'

# The what-if acceptance question: Llama-3.3-70B over five GPU types, 1 to 8
# GPUs per replica, one engine, 20 req/s of 2,048/256 tokens. The last line
# is the wall time (the goal: under 60 s on a 2-core machine); the Go
# benchmark BenchmarkWhatifAcceptance (./tuner/whatif) measures the same.
whatif-bench: build
	./$(BIN) whatif --model meta-llama/Llama-3.3-70B-Instruct --gpus H100-SXM,H200,B200,L40S,A100-80G \
		--max-gpus 8 --engine vllm --input-len 2048 --output-len 256 \
		--slo ttft_p99_ms=2000,tpot_p99_ms=50 --target-rps 20 --no-progress

# The simulator against public measurements of real vLLM and SGLang runs
# (internal/model/sim/testdata/fidelity/runs.json, docs/fidelity.md): the median and worst
# error per regime and metric, the whole table in bin/fidelity.md; fails
# when a regime's median is more than 2 points above
# internal/model/sim/medians.json (FIDELITY_ARGS=-update records them).
fidelity:
	$(GO) build -o bin/fidelity ./cmd/fidelity
	./bin/fidelity $(FIDELITY_ARGS)

# Every fuzz target for FUZZTIME (default 30s each); make test runs their
# seed corpora only.
fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

# bench against sim serve for SOAK_MINUTES (default 10), printing both
# processes' RSS, goroutines and open files every minute; fails if they grow.
soak: build
	BIN=$(BIN) ./scripts/soak.sh

clean:
	rm -rf bin .servetune
