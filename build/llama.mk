# build/llama.mk — llama.cpp and ggml compiled from an upstream source tree
# (LLAMA_CPP_DIR, which the Makefile resolves) into static archives under
# .cache/, which the cgo package links into the one binary: the default
# engine. Included by the Makefile.
#
# Why make rules and not CMake: the tree is built read-only and out of tree
# with no tool beyond g++ and binutils; one make run tracks every header
# (-MMD), so a second `make` only relinks; and the static CPU variants need
# per-variant flags and symbol renaming that ggml's CMake offers only for
# dynamically loaded backends (GGML_CPU_ALL_VARIANTS needs GGML_BACKEND_DL).
# The flags mirror ggml's CMake defaults for a Linux x86-64 CPU build:
# llamafile sgemm and weight repacking on, no OpenMP (ggml's own threadpool,
# as the Go-module route uses), GGML_SCHED_MAX_COPIES=4.
#
# CPU_VARIANTS (default "v2 v3 v4"): one build of ggml's CPU backend per
# x86-64 level, each archive's symbols renamed with objcopy to
# sf_cpu_<variant>_*, chosen at start-up by native/cpu_variant.cpp from
# CPUID (override SUPERFLUID_CPU=v3). Everything else (libllama, ggml-base,
# our native code) is compiled for the lowest variant. CPU_VARIANTS=single:
# one CPU backend at $(SIMD), unrenamed: a faster build for development.
# Objects go to .cache/llama/<commit>/ (cpu-<variant>/ for each backend).

override LLAMA_CPP_DIR := $(abspath $(LLAMA_CPP_DIR))
# The commit: from git when the tree is a clone (its own .git, not an
# enclosing repository's), else from SOURCE.md (a
# snapshot that says where it came from), else "unknown".
LLAMA_COMMIT := $(or $(if $(wildcard $(LLAMA_CPP_DIR)/.git),$(shell git -C $(LLAMA_CPP_DIR) rev-parse --short=9 HEAD 2>/dev/null)),$(shell grep -oE '\b[0-9a-f]{40}\b' $(LLAMA_CPP_DIR)/SOURCE.md 2>/dev/null | head -1 | cut -c1-9),unknown)
CPU_VARIANTS ?= v2 v3 v4

# libllama, ggml-base and our native code are compiled for the lowest
# variant in every mode, so that both modes share those objects: switching
# between them recompiles only the CPU backend.
LLAMA_BASE_SIMD := -march=x86-64-v2
ifeq ($(CPU_VARIANTS),single)
LLAMA_MODE   := single
# The variant's name carries its flags, so another SIMD builds anew.
CPU_BUILDS   := single$(subst =,-,$(subst $(eval) ,,$(SIMD)))
$(CPU_BUILDS)_FLAGS := $(SIMD)
else
LLAMA_MODE   := multi
CPU_BUILDS   := $(CPU_VARIANTS)
endif

v2_FLAGS := -march=x86-64-v2
v3_FLAGS := -march=x86-64-v3
v4_FLAGS := -march=x86-64-v4 -mavx512vnni -mavx512bf16

LB       := .cache/llama/$(LLAMA_COMMIT)
LS       := $(LLAMA_CPP_DIR)
LLAMA_OPT := -O3 -DNDEBUG -fPIC
LLAMA_DEFS := -D_XOPEN_SOURCE=600 -D_GNU_SOURCE -DGGML_SCHED_MAX_COPIES=4 -DGGML_USE_CPU
GGML_INC := -I$(LS)/ggml/include -I$(LS)/ggml/src -I$(LB)/gen
LLAMA_SRC_INC := -I$(LS)/include -I$(LS)/src $(GGML_INC)

# ggml-base plus the registry (ggml's "ggml" library).
GGML_BASE_SRC := ggml.c ggml.cpp ggml-alloc.c ggml-backend.cpp ggml-backend-meta.cpp ggml-opt.cpp \
	ggml-threading.cpp ggml-quants.c gguf.cpp ggml-backend-reg.cpp ggml-backend-dl.cpp
GGML_CPU_SRC := ggml-cpu.c ggml-cpu.cpp repack.cpp iqp.cpp hbm.cpp quants.c traits.cpp amx/amx.cpp \
	amx/mmq.cpp binary-ops.cpp unary-ops.cpp vec.cpp ops.cpp llamafile/sgemm.cpp \
	arch/x86/quants.c arch/x86/repack.cpp
LLAMA_SRC := $(patsubst $(LS)/src/%,%,$(wildcard $(LS)/src/*.cpp $(LS)/src/models/*.cpp))

obj = $(patsubst %,$(2)/%.o,$(1))
GGML_BASE_OBJ := $(call obj,$(GGML_BASE_SRC),$(LB)/ggml-base)
LLAMA_OBJ     := $(call obj,$(LLAMA_SRC),$(LB)/llama)
CPU_ARCHIVES  := $(foreach v,$(CPU_BUILDS),$(LB)/libggml-cpu-$(v).a)

# mtmd: llama.cpp's multimodal library (tools/mtmd: the CLIP/audio encoders,
# image and audio preprocessing, the chunked prompt tokenizer) and the
# vendored code it needs (stb_image and miniaudio are header-only and compiled
# inside mtmd-helper.cpp; vendor/hash is built here). The tree's own code, so
# it is compiled with the tree's flags and without our -Wall -Wextra; no
# MTMD_VIDEO (that spawns ffmpeg).
MTMD_SRC := mtmd.cpp mtmd-audio.cpp mtmd-image.cpp mtmd-helper.cpp mtmd-helper-gen.cpp clip.cpp \
	$(patsubst $(LS)/tools/mtmd/%,%,$(wildcard $(LS)/tools/mtmd/models/*.cpp))
MTMD_HASH_SRC := hash.cpp xxhash/xxhash.c sha1/sha1.c sha256/sha256.c
MTMD_OBJ := $(call obj,$(MTMD_SRC),$(LB)/mtmd) $(call obj,$(MTMD_HASH_SRC),$(LB)/mtmd/hash)
MTMD_INC := -I$(LS)/tools/mtmd -I$(LS)/vendor -I$(LS)/vendor/hash $(LLAMA_SRC_INC)

LLAMA_LIBS := $(LB)/libmtmd.a $(LB)/libllama.a $(CPU_ARCHIVES) $(LB)/libggml-base.a

# What the cgo package sees: upstream's headers, the API level, the commit,
# the variants it dispatches among; and the archives to link.
# The archives' newest mtime, so that rebuilt archives change the cgo
# package's flags and go relinks (it does not look at the archives' content).
LLAMA_LIBS_STAMP = $(shell stat -c %Y $(LLAMA_LIBS) 2>/dev/null | sort -n | tail -1)
LLAMA_CPP_FLAGS = -DSF_LLAMA_LIBS_STAMP=$(LLAMA_LIBS_STAMP) -I$(LS)/include -I$(LS)/ggml/include -I$(LS)/tools/mtmd -DSF_LLAMA_UPSTREAM=1 -DSF_LLAMA_COMMIT=$(LLAMA_COMMIT) \
	$(if $(filter multi,$(LLAMA_MODE)),$(foreach v,$(CPU_BUILDS),-DSF_CPU_HAVE_$(v)=1))
# A group: ggml-base registers the CPU backend, the CPU backend calls ggml-base.
LLAMA_LD_FLAGS := -Wl,--start-group $(addprefix $(CURDIR)/,$(LLAMA_LIBS)) -Wl,--end-group -lstdc++ -lm -lpthread -ldl

# The version headers CMake would configure.
$(LB)/gen/ggml-version.h:
	@mkdir -p $(@D)
	printf '#pragma once\n#define GGML_VERSION "upstream"\n#define GGML_COMMIT "%s"\n' $(LLAMA_COMMIT) > $@
$(LB)/gen/llama-version.h:
	@mkdir -p $(@D)
	printf '#pragma once\n#define LLAMA_VERSION "upstream"\n#define LLAMA_COMMIT "%s"\n' $(LLAMA_COMMIT) > $@

# Objects: one rule per source kind and directory; -MMD dependency files make
# a header change rebuild what includes it, and nothing else.
$(LB)/ggml-base/%.c.o: $(LS)/ggml/src/%.c | $(LB)/gen/ggml-version.h
	@mkdir -p $(@D)
	gcc -std=gnu11 $(LLAMA_OPT) $(LLAMA_BASE_SIMD) $(LLAMA_DEFS) $(GGML_INC) -MMD -c $< -o $@
$(LB)/ggml-base/%.cpp.o: $(LS)/ggml/src/%.cpp | $(LB)/gen/ggml-version.h
	@mkdir -p $(@D)
	g++ -std=c++17 $(LLAMA_OPT) $(LLAMA_BASE_SIMD) $(LLAMA_DEFS) $(GGML_INC) -MMD -c $< -o $@
$(LB)/llama/%.cpp.o: $(LS)/src/%.cpp | $(LB)/gen/llama-version.h
	@mkdir -p $(@D)
	g++ -std=c++17 $(LLAMA_OPT) $(LLAMA_BASE_SIMD) $(LLAMA_DEFS) $(LLAMA_SRC_INC) -MMD -c $< -o $@

$(LB)/mtmd/%.cpp.o: $(LS)/tools/mtmd/%.cpp | $(LB)/gen/llama-version.h
	@mkdir -p $(@D)
	g++ -std=c++17 $(LLAMA_OPT) $(LLAMA_BASE_SIMD) $(LLAMA_DEFS) $(MTMD_INC) -Wno-cast-qual -MMD -c $< -o $@
$(LB)/mtmd/hash/%.cpp.o: $(LS)/vendor/hash/%.cpp
	@mkdir -p $(@D)
	g++ -std=c++17 $(LLAMA_OPT) $(LLAMA_BASE_SIMD) $(MTMD_INC) -MMD -c $< -o $@
# sha1.c is C++ (it lives in a namespace), as the tree's CMake compiles it.
$(LB)/mtmd/hash/sha1/sha1.c.o: $(LS)/vendor/hash/sha1/sha1.c
	@mkdir -p $(@D)
	g++ -x c++ -std=c++17 $(LLAMA_OPT) $(LLAMA_BASE_SIMD) $(MTMD_INC) -w -MMD -c $< -o $@
$(LB)/mtmd/hash/%.c.o: $(LS)/vendor/hash/%.c
	@mkdir -p $(@D)
	gcc -std=gnu11 $(LLAMA_OPT) $(LLAMA_BASE_SIMD) $(MTMD_INC) -w -MMD -c $< -o $@

CPU_DEFS := -DGGML_USE_LLAMAFILE -DGGML_USE_CPU_REPACK -I$(LS)/ggml/src/ggml-cpu

# Small memsets as vector stores, larger ones through libc. Under
# -march=x86-64-vN, GCC tunes for "generic" and clears a kernel's small
# local arrays with `rep stosq`, whose start-up costs tens of cycles: in
# tinyBLAS's f16 gemm_bloc<4,3> (every tile zeroes its 12 accumulators) it
# took 14% of the kernel's samples on an AMD EPYC (Zen 3, perf), and a
# 1,500-token prefill of synth small f16 ran at 0.95x llama-server built
# with -march=native (which tunes for the host and emits no rep stos there).
# With the strategy the tile is cleared by a few stores on every CPU.
CPU_TUNE := -mmemset-strategy=vector_loop:2048:noalign,libcall:-1:noalign

# Each variant's flags are kept beside its objects: objects compiled with
# other flags (a CPU_TUNE or SIMD change) are compiled anew.
cpu_flags = $(LLAMA_OPT) $($(1)_FLAGS) $(CPU_TUNE) $(LLAMA_DEFS) $(CPU_DEFS)
cpu_flags_file = $(LB)/cpu-$(1)/.flags
define cpu_variant
$(shell mkdir -p $(LB)/cpu-$(1) && (echo '$(call cpu_flags,$(1))' | cmp -s - $(call cpu_flags_file,$(1)) || echo '$(call cpu_flags,$(1))' > $(call cpu_flags_file,$(1))))
$(LB)/cpu-$(1)/%.c.o: $(LS)/ggml/src/ggml-cpu/%.c $(call cpu_flags_file,$(1)) | $(LB)/gen/ggml-version.h
	@mkdir -p $$(@D)
	gcc -std=gnu11 $(call cpu_flags,$(1)) $(GGML_INC) -MMD -c $$< -o $$@
$(LB)/cpu-$(1)/%.cpp.o: $(LS)/ggml/src/ggml-cpu/%.cpp $(call cpu_flags_file,$(1)) | $(LB)/gen/ggml-version.h
	@mkdir -p $$(@D)
	g++ -std=c++17 $(call cpu_flags,$(1)) $(GGML_INC) -MMD -c $$< -o $$@
$(LB)/libggml-cpu-$(1).a: $(call obj,$(GGML_CPU_SRC),$(LB)/cpu-$(1)) build/rename-syms.sh
	build/rename-syms.sh $(if $(filter single%,$(1)),-,sf_cpu_$(1)_) $$@ $(call obj,$(GGML_CPU_SRC),$(LB)/cpu-$(1))
endef
$(foreach v,$(CPU_BUILDS),$(eval $(call cpu_variant,$(v))))

$(LB)/libggml-base.a: $(GGML_BASE_OBJ)
	rm -f $@ && ar rcs $@ $^
$(LB)/libllama.a: $(LLAMA_OBJ)
	rm -f $@ && ar rcs $@ $^
$(LB)/libmtmd.a: $(MTMD_OBJ)
	rm -f $@ && ar rcs $@ $^

llama-libs: $(LLAMA_LIBS)
	@:

-include $(shell find $(LB) -type f -name '*.d' 2>/dev/null)
