// lora.cpp — LoRA adapters: loaded with the model, applied per step.
//
// llama.cpp applies adapters per context, not per sequence: every row of a
// llama_decode goes through the same set. So the adapters are loaded once
// (sf_open_params.lora_paths) and each plan names the scales its step runs
// under (sf_plan.lora_scales); the scheduler puts only lanes of one adapter
// set into a step. llama_set_adapters_lora compares the set with the one
// the context holds and changes nothing when they are equal, so an
// unchanged set costs a comparison per step.
#include <cmath>

#include "internal.h"

const char *sf_lora_load(sf_engine *e, const sf_open_params *p, char *msg, size_t msg_len) {
    if (p->n_lora < 0 || p->n_lora > SF_MAX_LORA || (p->n_lora > 0 && p->lora_paths == nullptr)) {
        snprintf(msg, msg_len, "%d LoRA adapters: at most %d are loaded", p->n_lora, SF_MAX_LORA);
        return msg;
    }
    if (p->n_lora > 0 && e->pooling != LLAMA_POOLING_TYPE_NONE) {
        return "LoRA adapters apply to a generation model; this one pools (an embedding model or a reranker)";
    }
    for (int32_t i = 0; i < p->n_lora; i++) {
        const char *path = p->lora_paths[i];
        if (path == nullptr) {
            return "a LoRA adapter with no path";
        }
        // llama.cpp logs its reason (wrong architecture, a tensor the model
        // lacks, a shape that differs) and returns null.
        llama_adapter_lora *a = llama_adapter_lora_init(e->model, path);
        if (a == nullptr) {
            snprintf(msg, msg_len, "cannot load LoRA adapter %s for this model", path);
            return msg;
        }
        e->loras.push_back(a);
    }
    e->lora_scales.assign(e->loras.size(), 0.0f);
    return nullptr;
}

int sf_lora_check(sf_engine *e, const sf_plan *p) {
    if (p->n_lora_scales == 0) {
        return SF_OK;
    }
    if (p->lora_scales == nullptr || p->n_lora_scales != (uint32_t)e->loras.size()) {
        return sf_fail(e, SF_ERR_INVALID, "plan: %u LoRA scales for %zu adapters", p->n_lora_scales, e->loras.size());
    }
    for (uint32_t i = 0; i < p->n_lora_scales; i++) {
        float s = p->lora_scales[i];
        if (!std::isfinite(s) || std::fabs(s) > SF_MAX_LORA_SCALE) {
            return sf_fail(e, SF_ERR_INVALID, "plan: LoRA adapter %u scale %g outside [-%g, %g]", i, (double)s,
                           (double)SF_MAX_LORA_SCALE, (double)SF_MAX_LORA_SCALE);
        }
    }
    return SF_OK;
}

void sf_lora_apply(sf_engine *e, const sf_plan *p) {
    if (e->loras.empty()) {
        return;
    }
    for (size_t i = 0; i < e->lora_scales.size(); i++) {
        e->lora_scales[i] = p->n_lora_scales == 0 ? 0.0f : p->lora_scales[i];
    }
#if SF_LLAMA_UPSTREAM
    llama_set_adapters_lora(e->ctx, e->loras.data(), e->loras.size(), e->lora_scales.data());
#else
    llama_clear_adapter_lora(e->ctx);
    for (size_t i = 0; i < e->loras.size(); i++) {
        if (e->lora_scales[i] != 0.0f) {
            llama_set_adapter_lora(e->ctx, e->loras[i], e->lora_scales[i]);
        }
    }
#endif
}
