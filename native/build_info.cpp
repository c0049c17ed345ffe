// build_info.cpp — which llama.cpp is compiled in, and refusing a model
// whose architecture it does not know with a message that says what to do.
#include <cstdio>
#include <string>

#include "../src/llama-arch.h"
#include "gguf.h"
#include "internal.h"

#define SF_STR2(x) #x
#define SF_STR(x) SF_STR2(x)

#ifndef SF_LLAMA_COMMIT
// The commit github.com/ollama/ollama v0.24.0 vendors (its Makefile.sync
// FETCH_HEAD); the build passes the real one, this is the fallback.
#define SF_LLAMA_COMMIT ec98e2002
#endif

const char *sf_llama_commit(void) { return SF_STR(SF_LLAMA_COMMIT); }

const char *sf_llama_source(void) {
#if SF_LLAMA_UPSTREAM
    return "upstream source tree";
#else
    return "Go module github.com/ollama/ollama";
#endif
}

// sf_unknown_arch writes the refusal into msg and returns it when the GGUF
// at path names an architecture llama.cpp's table lacks; null otherwise
// (also when the file cannot be read: the loader then says why).
const char *sf_unknown_arch(const char *path, char *msg, size_t msg_len) {
    gguf_init_params gp = {};
    gp.no_alloc = true;
    gp.ctx = nullptr;
    gguf_context *g = gguf_init_from_file(path, gp);
    if (g == nullptr) {
        return nullptr;
    }
    std::string arch;
    int64_t key = gguf_find_key(g, "general.architecture");
    if (key >= 0 && gguf_get_kv_type(g, key) == GGUF_TYPE_STRING) {
        arch = gguf_get_val_str(g, key);
    }
    gguf_free(g);
    if (arch.empty() || llm_arch_from_string(arch) != LLM_ARCH_UNKNOWN) {
        return nullptr;
    }
    snprintf(msg, msg_len,
             "model architecture \"%s\" is not known to the llama.cpp compiled in (%s, %s); "
             "build superfluid with the current llama.cpp: plain make, not make ENGINE=module (see README)",
             arch.c_str(), sf_llama_commit(), sf_llama_source());
    return msg;
}
