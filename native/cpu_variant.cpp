// cpu_variant.cpp — which build of ggml's CPU backend runs.
//
// A multi-variant build (build/llama.mk, SF_CPU_HAVE_v2/v3/v4) links one
// CPU backend per x86-64 level, each archive's symbols renamed
// sf_cpu_<variant>_*. ggml's registry asks for ggml_backend_cpu_reg(); this
// file defines it and forwards to the best variant the CPU supports (or the
// one SUPERFLUID_CPU names), chosen once. Nothing of a variant runs before
// that choice: its only entry point is its registration function. This file
// is compiled for the lowest level, as is everything outside the variants.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "ggml-backend.h"
#include "internal.h"

#if defined(SF_CPU_HAVE_v2) || defined(SF_CPU_HAVE_v3) || defined(SF_CPU_HAVE_v4)
#define SF_CPU_MULTI 1

extern "C" {
#ifdef SF_CPU_HAVE_v2
ggml_backend_reg_t sf_cpu_v2_ggml_backend_cpu_reg(void);
#endif
#ifdef SF_CPU_HAVE_v3
ggml_backend_reg_t sf_cpu_v3_ggml_backend_cpu_reg(void);
#endif
#ifdef SF_CPU_HAVE_v4
ggml_backend_reg_t sf_cpu_v4_ggml_backend_cpu_reg(void);
#endif
}

namespace {

struct sf_cpu_build {
    const char *name;
    ggml_backend_reg_t (*reg)(void);
    bool (*supported)(void);
};

bool sf_cpu_v2_ok() {
    return __builtin_cpu_supports("x86-64-v2");
}
bool sf_cpu_v3_ok() {
    return __builtin_cpu_supports("x86-64-v3");
}
// v4 is built with VNNI and BF16 on top of x86-64-v4 (AVX-512 F/BW/CD/DQ/VL).
bool sf_cpu_v4_ok() {
    return __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("avx512bf16");
}

// Best first.
const sf_cpu_build sf_cpu_builds[] = {
#ifdef SF_CPU_HAVE_v4
    {"v4", sf_cpu_v4_ggml_backend_cpu_reg, sf_cpu_v4_ok},
#endif
#ifdef SF_CPU_HAVE_v3
    {"v3", sf_cpu_v3_ggml_backend_cpu_reg, sf_cpu_v3_ok},
#endif
#ifdef SF_CPU_HAVE_v2
    {"v2", sf_cpu_v2_ggml_backend_cpu_reg, sf_cpu_v2_ok},
#endif
};

struct sf_cpu_choice {
    const sf_cpu_build *build = nullptr;
    std::string why;  // how it was chosen, for the start-up log
};

sf_cpu_choice sf_cpu_choose() {
    __builtin_cpu_init();
    sf_cpu_choice c;
    const sf_cpu_build *best = nullptr;
    for (const sf_cpu_build &b : sf_cpu_builds) {
        if (b.supported()) {
            best = &b;
            break;
        }
    }
    // The lowest build is the floor: a CPU below it fails there, not here.
    const sf_cpu_build *lowest = &sf_cpu_builds[sizeof(sf_cpu_builds) / sizeof(sf_cpu_builds[0]) - 1];
    const char *want = getenv("SUPERFLUID_CPU");
    if (want != nullptr && want[0] != '\0') {
        for (const sf_cpu_build &b : sf_cpu_builds) {
            if (strcmp(b.name, want) != 0) {
                continue;
            }
            if (!b.supported()) {
                c.why = std::string("SUPERFLUID_CPU=") + want + " is not supported by this CPU; using the best it supports";
                break;
            }
            c.build = &b;
            c.why = std::string("SUPERFLUID_CPU=") + want;
            return c;
        }
        if (c.why.empty()) {
            c.why = std::string("SUPERFLUID_CPU=") + want + " names no build here; using the best the CPU supports";
        }
    } else {
        c.why = "cpuid";
    }
    c.build = best != nullptr ? best : lowest;
    return c;
}

const sf_cpu_choice &sf_cpu_chosen() {
    static const sf_cpu_choice c = sf_cpu_choose();
    return c;
}

}  // namespace

// ggml's registry (ggml-backend-reg.cpp, GGML_USE_CPU) registers this.
extern "C" ggml_backend_reg_t ggml_backend_cpu_reg(void) { return sf_cpu_chosen().build->reg(); }
#endif

int32_t sf_cpu_variant(char *out, int32_t cap) {
    if (out == nullptr || cap <= 0) {
        return -1;
    }
#ifdef SF_CPU_MULTI
    std::string s = std::string(sf_cpu_chosen().build->name) + " (of";
    for (const sf_cpu_build &b : sf_cpu_builds) {
        s += ' ';
        s += b.name;
    }
    s += "; " + sf_cpu_chosen().why + ")";
#else
    std::string s = "single build";
#endif
    size_t n = std::min(s.size(), (size_t)cap - 1);
    memcpy(out, s.data(), n);
    out[n] = '\0';
    return (int32_t)n;
}
