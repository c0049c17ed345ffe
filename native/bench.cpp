// bench.cpp — the plain decode loop the tick is measured against: what a
// hand-written llama.cpp program does, with nothing of superfluid's around it.
#include "internal.h"

static int64_t plain_decode(sf_engine *e, int32_t n_lanes, int32_t prompt_len, int32_t n_rounds) {
    if (e == nullptr || n_lanes < 1 || n_lanes > e->n_seq_max || n_lanes > e->n_batch || prompt_len < 1 ||
        prompt_len > e->n_batch || n_rounds < 1 || prompt_len + n_rounds > e->n_ctx) {
        return -SF_ERR_INVALID;
    }
    for (int32_t s = 0; s < n_lanes; s++) {
        if (e->seq_lane[(size_t)s] >= 0) {
            return -SF_ERR_SEQ_BUSY;
        }
    }
    sf_compute_lock compute(e);
    llama_batch &b = e->batch;
    std::vector<llama_token> next((size_t)n_lanes);
    for (int32_t s = 0; s < n_lanes; s++) {
        llama_memory_seq_rm(e->mem, s, -1, -1);
        b.n_tokens = 0;
        for (int32_t i = 0; i < prompt_len; i++) {
            sf_batch_add(b, (llama_token)((1 + s * 31 + i * 7) % e->n_vocab), i, s, i == prompt_len - 1);
        }
        if (llama_decode(e->ctx, b) != 0) {
            return -SF_ERR_DECODE;
        }
        const float *lg = llama_get_logits_ith(e->ctx, prompt_len - 1);
        llama_token best = 0;
        for (int32_t t = 1; t < e->n_vocab; t++) {
            best = lg[t] > lg[best] ? t : best;
        }
        next[(size_t)s] = best;
    }
    int64_t t0 = sf_now_ns();
    for (int32_t r = 0; r < n_rounds; r++) {
        b.n_tokens = 0;
        for (int32_t s = 0; s < n_lanes; s++) {
            sf_batch_add(b, next[(size_t)s], prompt_len + r, s, true);
        }
        if (llama_decode(e->ctx, b) != 0) {
            return -SF_ERR_DECODE;
        }
        for (int32_t s = 0; s < n_lanes; s++) {
            const float *lg = llama_get_logits_ith(e->ctx, s);
            llama_token best = 0;
            for (int32_t t = 1; t < e->n_vocab; t++) {
                best = lg[t] > lg[best] ? t : best;
            }
            next[(size_t)s] = best;
        }
    }
    int64_t dt = sf_now_ns() - t0;
    for (int32_t s = 0; s < n_lanes; s++) {
        llama_memory_seq_rm(e->mem, s, -1, -1);
    }
    return dt;
}

int64_t sf_bench_plain_decode(sf_engine *e, int32_t n_lanes, int32_t prompt_len, int32_t n_rounds) {
    return sf_guard([&] { return plain_decode(e, n_lanes, prompt_len, n_rounds); },
                    [&](const char *msg) { return (int64_t)-sf_fail(e, SF_ERR_EXCEPTION, "plain decode: %s", msg); });
}

// The prompt of one sequence in one llama_decode call (llama.cpp splits it
// into micro-batches of n_ubatch), as llama-bench's prompt test does.
static int64_t plain_prefill(sf_engine *e, int32_t prompt_len) {
    if (e == nullptr || prompt_len < 1 || prompt_len > e->n_batch || prompt_len > e->n_ctx) {
        return -SF_ERR_INVALID;
    }
    if (e->seq_lane[0] >= 0) {
        return -SF_ERR_SEQ_BUSY;
    }
    sf_compute_lock compute(e);
    llama_batch &b = e->batch;
    llama_memory_seq_rm(e->mem, 0, -1, -1);
    b.n_tokens = 0;
    for (int32_t i = 0; i < prompt_len; i++) {
        sf_batch_add(b, (llama_token)((1 + i * 7) % e->n_vocab), i, 0, i == prompt_len - 1);
    }
    int64_t t0 = sf_now_ns();
    if (llama_decode(e->ctx, b) != 0) {
        return -SF_ERR_DECODE;
    }
    (void)llama_get_logits_ith(e->ctx, prompt_len - 1);
    int64_t dt = sf_now_ns() - t0;
    llama_memory_seq_rm(e->mem, 0, -1, -1);
    return dt;
}

int64_t sf_bench_plain_prefill(sf_engine *e, int32_t prompt_len) {
    return sf_guard([&] { return plain_prefill(e, prompt_len); },
                    [&](const char *msg) { return (int64_t)-sf_fail(e, SF_ERR_EXCEPTION, "plain prefill: %s", msg); });
}
