# superfluid — build, test and benchmark.
#
# Every go command goes through this file: cgo compiles our native code
# with the flags below and links llama.cpp's archives (build/llama.mk); a go
# command run with different CGO_* variables recompiles the cgo packages
# (on ENGINE=module that is all of llama.cpp, ≈3–6 minutes on 2 cores).

GO          ?= go
# x86-64-v3: AVX2, FMA, F16C. `make portable` drops it.
SIMD        ?= -march=x86-64-v3
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS      = -X superfluid/command.version=$(VERSION)
MODELS      ?= .cache/models

# Where llama.cpp comes from. Default (ENGINE=upstream): the current
# llama.cpp, pinned by commit, compiled by build/llama.mk into static
# archives under .cache/llama/<commit>/ and linked. Its source, first found:
#   LLAMA_CPP_DIR=/path/to/llama.cpp            a tree you name;
#   ../shared/llama.cpp                         beside the repository (CI);
#   third_party/llama.cpp                       the git submodule, whose
#     gitlink is the pin (LLAMA_PIN), fetched here (git submodule update,
#     network) when neither of the others exists.
# ENGINE=module: the offline fallback, llama.cpp ec98e2002 (December 2025)
# as the Go module github.com/ollama/ollama vendors it, compiled by cgo
# (-tags sfmodule; only the Go module cache needed).
ENGINE        ?= upstream
LLAMA_SUBMODULE := third_party/llama.cpp
LLAMA_PIN     := $(shell git ls-files -s -- $(LLAMA_SUBMODULE) 2>/dev/null | cut -d" " -f2)
NPROC         := $(shell nproc 2>/dev/null || echo 2)
ifeq ($(ENGINE),module)
$(warning ENGINE=module: building the OFFLINE FALLBACK engine, llama.cpp ec98e2002 (December 2025) from the Go module: about half the current engine's prefill speed, AVX2 only, no Qwen3.5/Gemma 4 or later architectures. Plain make builds the current llama.cpp.)
OLLAMA_DIR   = $(shell $(GO) list -m -f '{{.Dir}}' github.com/ollama/ollama)
# ggml-cpu's cpu.go defines only GGML_USE_LLAMAFILE; ggml's CMake (and the
# upstream route) also define GGML_USE_CPU_REPACK, which registers the
# buffer type that repacks Q4_0/Q4_K/IQ4_NL weights into interleaved rows
# for the AVX2 kernels. It reaches ggml-cpu through CGO_CPPFLAGS.
LLAMA_INC    = -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include -DGGML_USE_CPU_REPACK
NATIVE_SIMD  = $(SIMD)
LLAMA_LIBS   =
# CGO_LDFLAGS stays unset here: setting it (even empty) would change the
# cgo packages' build keys and recompile the module's llama.cpp.
export GOFLAGS = -tags=sfmodule
ENV_EXTRA    = GOFLAGS='$(GOFLAGS)'
# A -tags flag on a command line replaces GOFLAGS' one: targets that pass
# their own tags add this.
ROUTE_TAGS   = ,sfmodule
else ifeq ($(ENGINE),upstream)
ifeq ($(LLAMA_CPP_DIR),)
# The shared tree by its real path, so that every checkout beside it
# compiles with the same flags (one Go build cache) and names the same
# .cache/llama/<commit>.
LLAMA_CPP_DIR := $(or $(realpath $(CURDIR)/../shared/llama.cpp),$(CURDIR)/$(LLAMA_SUBMODULE))
LLAMA_DEFAULTED := 1
endif
# The submodule is fetched while the Makefile is read: build/llama.mk lists
# the tree's sources and reads its commit then.
ifeq ($(abspath $(LLAMA_CPP_DIR)),$(CURDIR)/$(LLAMA_SUBMODULE))
ifeq ($(wildcard $(LLAMA_CPP_DIR)/src/llama.cpp),)
$(info llama.cpp: no LLAMA_CPP_DIR and no ../shared/llama.cpp; fetching $(LLAMA_SUBMODULE) at $(LLAMA_PIN))
LLAMA_FETCH := $(shell git submodule update --init --depth 1 -- $(LLAMA_SUBMODULE) >&2 && echo ok)
ifneq ($(LLAMA_FETCH),ok)
$(error llama.cpp: could not fetch $(LLAMA_SUBMODULE) (no network?). Point LLAMA_CPP_DIR at a llama.cpp tree, or build the offline fallback: make ENGINE=module)
endif
endif
endif
# build/llama.mk's first rule would otherwise become the default goal, and
# a plain `make` would build one header instead of bin/superfluid.
.DEFAULT_GOAL := all
include build/llama.mk
# A defaulted tree at another commit than the pin is built, with a warning.
ifeq ($(LLAMA_DEFAULTED),1)
ifneq ($(LLAMA_PIN),)
ifeq ($(findstring $(LLAMA_COMMIT),$(LLAMA_PIN)),)
$(warning llama.cpp: $(LLAMA_CPP_DIR) is at $(LLAMA_COMMIT), not at the pinned $(LLAMA_PIN))
endif
endif
endif
LLAMA_INC    = $(LLAMA_CPP_FLAGS)
NATIVE_SIMD  = $(LLAMA_BASE_SIMD)
export CGO_LDFLAGS = $(LLAMA_LD_FLAGS)
ENV_EXTRA    = CGO_LDFLAGS='$(CGO_LDFLAGS)'
ROUTE_TAGS   =
else
$(error ENGINE=$(ENGINE): upstream (the default) or module)
endif

export CGO_ENABLED  = 1
export CGO_CPPFLAGS = $(LLAMA_INC)
export CGO_CFLAGS   = -O3 $(NATIVE_SIMD)
export CGO_CXXFLAGS = -O3 $(NATIVE_SIMD)

.PHONY: env all build test unit race native-check vet fmt-check static portable asan bench bench-engine bench-spec bench-spec-mtp bench-satellite bench-families models clean deps llama-libs engine-test

all: build

# deps: the Go modules, and (but on ENGINE=module) llama.cpp's archives,
# compiled -j$(NPROC) whatever -j make was given (a cold build is ≈5–9
# minutes on 2 cores in parallel).
deps:
ifneq ($(LLAMA_LIBS),)
	@$(MAKE) --no-print-directory -j$(NPROC) llama-libs
endif
	$(GO) mod download

build: deps
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/superfluid .

# Tests: formatting, vet, the native sources warning-free, then every
# package's tests on the real engine.
test: deps fmt-check vet native-check unit race asan

unit:
	$(GO) test -count=1 -timeout 20m ./...

# The engine, end-to-end and CLI tests alone (part of test).
engine-test: deps native-check
	$(GO) vet ./cgo/ ./e2e/ .
	$(GO) test -count=1 -timeout 30m ./cgo/ ./e2e/ .

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The race detector over the packages whose goroutines meet: the scheduler,
# the cache tiers, the servers; and the engine's Close racing text calls
# (the first cgo run under -race rebuilds llama.cpp instrumented, ≈5 min).
race: deps
	$(GO) test -race -count=1 ./sched/... ./kv/ ./park/ ./http/ ./batch/ ./batches/ ./bench/ ./embed/
	$(GO) test -race -count=1 -run 'TestTextCallsAfterCloseAreSafe|TestExceptionIn' ./cgo/

# Our C/C++ must compile without a warning.
native-check: deps
	@for f in native/*.cpp; do \
		g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only $(LLAMA_INC) -Inative $$f || exit 1; \
	done
	@echo "native: no warnings"

# A fully static binary (glibc, libstdc++ and libm linked in).
static: deps
	$(GO) build -tags netgo,osusergo$(ROUTE_TAGS) \
		-ldflags '$(LDFLAGS) -linkmode external -extldflags -static' -o bin/superfluid-static .
	@ldd bin/superfluid-static 2>&1 | grep -q "not a dynamic executable" && echo "bin/superfluid-static: static"

# Without x86-64-v3: runs on any x86-64, at the scalar baseline's speed.
portable:
	$(MAKE) build SIMD= 

# The engine's tests with our native code under AddressSanitizer (llama.cpp
# itself is not instrumented, so its build cache is reused).
asan: deps
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		$(GO) test -count=1 -tags sfasan$(ROUTE_TAGS) -run . ./cgo/

# Benchmarks on the 0.5B-shaped synthetic model (generated once): the tick
# against a plain llama_decode loop, the scheduler (decode streams, FIM
# time to first token under background load, with and without classes),
# and parking (restore against recompute). Run them on a quiet machine.
bench: deps $(MODELS)/synth-0.5b-q8_0.gguf
	SF_BENCH_MODEL=$(CURDIR)/$(MODELS)/synth-0.5b-q8_0.gguf \
		$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 60m ./cgo/ ./e2e/

# The engine against the raw llama.cpp it compiles, on issue 14's two
# models: a 2,000-token prefill (one tick, and one plain llama_decode at
# micro-batches 64…512) and decode at 1 and 8 streams (sf_tick against a
# plain llama_decode loop); on the Q4_0 model also weight repacking on
# against off (the only one of the three types x86 repacks); on the f16
# model also what idle cached cells in the KV pool cost a cold prompt,
# against moving them to host memory and back. On the
# offline fallback too: make ENGINE=module bench-engine. Run it on a quiet
# machine.
bench-engine: deps $(MODELS)/synth-0.5b-q8_0.gguf $(MODELS)/synth-small-f16.gguf $(MODELS)/synth-0.5b-q4_0.gguf
	@for m in 0.5b-q8_0 small-f16 0.5b-q4_0; do \
		benches='Prefill|PrefillUBatch|Decode|ThreadPool'; \
		case $$m in *q4_0) benches="$$benches|PrefillRepack";; *f16) benches="$$benches|PrefillBesideResident|HostRoundTrip";; esac; \
		echo "== synth-$$m, llama.cpp $(or $(LLAMA_COMMIT),ec98e2002 (Go module))"; \
		SF_BENCH_MODEL=$(CURDIR)/$(MODELS)/synth-$$m.gguf $(GO) test -run '^$$' \
			-bench "^Benchmark($$benches)\$$" -benchtime 1x -count 1 -timeout 60m ./cgo/ \
			| grep -E '^(Benchmark|cpu:)' || exit 1; \
	done

# Speculative decoding on the 0.5B-shaped model: a decode step with k
# draft rows a lane against a plain one (1 and 4 lanes, the break-even
# acceptance), then n-gram drafts through the scheduler — none, gated,
# ungated — on random prose and on a repeated passage.
bench-spec: deps $(MODELS)/synth-0.5b-q8_0.gguf $(MODELS)/synth-tiny-v151936-f16.gguf
	SF_BENCH_MODEL=$(CURDIR)/$(MODELS)/synth-0.5b-q8_0.gguf SF_BENCH_DRAFT_MODEL=$(CURDIR)/$(MODELS)/synth-tiny-v151936-f16.gguf \
		$(GO) test -run '^$$' -bench '^Benchmark(SpecStepCost|DraftModelCost|Speculation|SpeculationDraftModel)$$' -benchtime 1x -count 1 -timeout 90m ./cgo/ ./e2e/

# --spec-type draft-mtp beside llama-server's on a 0.5B-shaped synth GLM-4.5
# (glm4moe: experts and a multi-token prediction block, Qwen2.5's
# vocabulary): no drafts, synthetic acceptance at mean length 3, the
# block's own drafts; 1 and 4 streams, ratios (bench/spec_mtp.sh; ≈ 10
# minutes on two cores). LLAMA_SERVER: the llama-server binary.
LLAMA_SERVER ?= /work/llama-build/bin/llama-server
SHARED_MODELS ?= ../shared/models
bench-spec-mtp: build $(MODELS)/synth-glm4moe-0.5b-q8_0.gguf
	bench/spec_mtp.sh bin/superfluid $(LLAMA_SERVER) $(MODELS)/synth-glm4moe-0.5b-q8_0.gguf 2

$(MODELS)/synth-glm4moe-0.5b-q8_0.gguf: | build
	@mkdir -p $(MODELS)
	bin/superfluid model synth --shape 0.5b --arch glm4moe --vocab $(SHARED_MODELS)/ggml-vocab-qwen2.5.gguf --seed 3 --type q8_0 -o $@

# The draft model for the 0.5B target: tiny, over its vocabulary, other weights.
$(MODELS)/synth-tiny-v151936-f16.gguf: | build
	@mkdir -p $(MODELS)
	bin/superfluid model synth --shape tiny --vocab-size 151936 --seed 2 --type f16 -o $@

# Issue 15's FIM-satellite benchmark: FIM latency on the small model, idle
# and beside four 2,000-token prompts on the 0.5B one, with both in one
# serve (--fim-model, the arbiter) against two serve processes on the same
# cores; prints a table (≈ 3 minutes; bench/satellite.sh says what it runs,
# SATELLITE=one|two runs one setup). Run it on a quiet machine.
bench-satellite: build $(MODELS)/synth-0.5b-q8_0.gguf $(MODELS)/synth-small-f16.gguf
	MODELS=$(MODELS) bench/satellite.sh $(or $(SATELLITE),both)

# Issue 22's family benchmark: on dense, MoE, sliding-window, hybrid and
# hybrid-MoE synthetic models, the cached share and time to first token of
# a conversation edited after 85% of its opening, and of its second turn;
# beside llama-server from the same llama.cpp tree when LLAMA_SERVER names
# its binary (bench/families.sh says what it runs; ARCHS=… picks families).
# Run it on a quiet machine.
bench-families: build
	LLAMA_SERVER=$(LLAMA_SERVER) bench/families.sh $(ARCHS)

models: $(MODELS)/synth-tiny-f16.gguf $(MODELS)/synth-0.5b-q8_0.gguf

$(MODELS)/synth-%-q8_0.gguf: | build
	@mkdir -p $(MODELS)
	bin/superfluid model synth --shape $* --type q8_0 -o $@

$(MODELS)/synth-%-q4_0.gguf: | build
	@mkdir -p $(MODELS)
	bin/superfluid model synth --shape $* --type q4_0 -o $@

$(MODELS)/synth-%-f16.gguf: | build
	@mkdir -p $(MODELS)
	bin/superfluid model synth --shape $* --type f16 -o $@

# The build environment for a shell: eval "$$(make -s env)", then plain go
# commands share the Makefile's build cache.
env:
	@echo "export CGO_ENABLED=1 CGO_CPPFLAGS='$(LLAMA_INC)' CGO_CFLAGS='$(CGO_CFLAGS)' CGO_CXXFLAGS='$(CGO_CXXFLAGS)' $(ENV_EXTRA)"

clean:
	rm -rf bin .cache
