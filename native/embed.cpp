// embed.cpp — sf_embed: several inputs' pooled embeddings in one decode.
//
// An embedding engine's context was opened with embeddings on and the
// model's pooling (engine.cpp): llama.cpp pools each sequence of a
// micro-batch into one vector, which llama_get_embeddings_seq hands out.
// Pooling happens per micro-batch, so a sequence must lie wholly inside one;
// the context has n_ubatch = n_batch, and a call carries at most n_batch
// tokens, so each call is exactly one micro-batch. Every input starts at
// position 0 of its own sequence (CLS pools the token at position 0, LAST
// the highest position), and every token is an output row (the pooling
// matrices are sized by the micro-batch's token count).
//
// Everything a request could get wrong is checked before llama.cpp sees
// it: a bad token id reaches an out-of-bounds read in get_rows, more
// tokens than n_batch a GGML_ASSERT, a sequence id past n_seq_max a refused
// batch.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "internal.h"

int32_t sf_model_pooling(const llama_model *m, const char *arch) {
    char key[128];
    snprintf(key, sizeof key, "%s.pooling_type", arch);
    char buf[32] = {};
    if (llama_model_meta_val_str(m, key, buf, sizeof buf) <= 0) {
        return LLAMA_POOLING_TYPE_NONE;
    }
    char *end = nullptr;
    long v = strtol(buf, &end, 10);
    if (end == buf || *end != '\0') {
        return -1;
    }
    switch (v) {
    case LLAMA_POOLING_TYPE_NONE:
    case LLAMA_POOLING_TYPE_MEAN:
    case LLAMA_POOLING_TYPE_CLS:
    case LLAMA_POOLING_TYPE_LAST:
    case LLAMA_POOLING_TYPE_RANK:  // a reranker: its head scores the pooled row
        return (int32_t)v;
    }
    return -1;  // unknown
}

namespace {

// Checks the whole call; a refusal names the input at fault.
int check_embed(sf_engine *e, const int32_t *tokens, uint32_t n_tokens, const sf_embed_input *in, uint32_t n_in,
                const float *out, size_t out_cap) {
    if (e->pooling == LLAMA_POOLING_TYPE_NONE) {
        return sf_fail(e, SF_ERR_UNSUPPORTED, "this model does not compute embeddings (its pooling type is none)");
    }
    if (n_in == 0) {
        return sf_fail(e, SF_ERR_INVALID, "embed: no inputs");
    }
    if (n_in > (uint32_t)e->n_seq_max) {
        return sf_fail(e, SF_ERR_SEQ_RANGE, "embed: %u inputs, more than the engine's %d sequences", n_in,
                       e->n_seq_max);
    }
    if (in == nullptr || (tokens == nullptr && n_tokens > 0) || out == nullptr) {
        return sf_fail(e, SF_ERR_INVALID, "embed: null arguments");
    }
    if ((uint64_t)out_cap < (uint64_t)n_in * (uint64_t)e->n_embd) {
        return sf_fail(e, SF_ERR_BUFFER, "embed: room for %zu floats, %u inputs need %llu", out_cap, n_in,
                       (unsigned long long)n_in * (unsigned long long)e->n_embd);
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < n_in; i++) {
        if (in[i].len == 0) {
            return sf_fail_lane(e, i, SF_ERR_INVALID, "embed: input %u is empty", i);
        }
        if ((uint64_t)in[i].off + in[i].len > n_tokens) {
            return sf_fail_lane(e, i, SF_ERR_INVALID, "embed: input %u [%u, +%u) outside the call's %u tokens", i,
                                in[i].off, in[i].len, n_tokens);
        }
        if (in[i].len > (uint32_t)e->n_batch || in[i].len > (uint32_t)e->n_ctx) {
            return sf_fail_lane(e, i, SF_ERR_CONTEXT,
                                "embed: input %u has %u tokens; an input may have at most %d (the batch size)", i,
                                in[i].len, std::min(e->n_batch, e->n_ctx));
        }
        for (uint32_t j = 0; j < in[i].len; j++) {
            int32_t t = tokens[in[i].off + j];
            if (t < 0 || t >= e->n_vocab) {
                return sf_fail_lane(e, i, SF_ERR_INVALID, "embed: input %u: token %d outside the vocabulary of %d", i,
                                    t, e->n_vocab);
            }
        }
        total += in[i].len;
    }
    if (total > (uint64_t)e->n_batch || total > (uint64_t)e->n_ctx) {
        return sf_fail(e, SF_ERR_BATCH, "embed: %llu tokens in one call, more than the batch of %d",
                       (unsigned long long)total, std::min(e->n_batch, e->n_ctx));
    }
    return SF_OK;
}

// Empties the sequences a call used (and any a failed call left behind).
// An encoder (BERT and kin) has no memory: llama_decode runs it whole.
void clear_sequences(sf_engine *e, uint32_t n_in) {
    if (e->mem == nullptr) {
        return;
    }
    for (uint32_t i = 0; i < n_in; i++) {
        llama_memory_seq_rm(e->mem, (llama_seq_id)i, -1, -1);
    }
}

int embed(sf_engine *e, const int32_t *tokens, const sf_embed_input *in, uint32_t n_in, float *out) {
    llama_batch &b = e->batch;
    b.n_tokens = 0;
    for (uint32_t i = 0; i < n_in; i++) {
        for (uint32_t j = 0; j < in[i].len; j++) {
            // every row is an output: pooling reads them all
            sf_batch_add(b, tokens[in[i].off + j], (llama_pos)j, (llama_seq_id)i, true);
        }
    }
    clear_sequences(e, n_in);
    int rc;
    {
        sf_compute_lock compute(e);
        rc = llama_decode(e->ctx, b);
    }
    if (rc != 0) {
        clear_sequences(e, n_in);
        return sf_fail(e, rc == 1 ? SF_ERR_KV_FULL : SF_ERR_DECODE, "embed: llama_decode returned %d", rc);
    }
    if (e->inject == SF_INJECT_EMBED) {
        e->inject = SF_INJECT_NONE;
        throw std::runtime_error("injected by a test");
    }
    for (uint32_t i = 0; i < n_in; i++) {
        const float *v = llama_get_embeddings_seq(e->ctx, (llama_seq_id)i);
        if (v == nullptr) {
            clear_sequences(e, n_in);
            return sf_fail_lane(e, i, SF_ERR_DECODE, "embed: llama.cpp pooled no vector for input %u", i);
        }
        memcpy(out + (size_t)i * (size_t)e->n_embd, v, sizeof(float) * (size_t)e->n_embd);
    }
    clear_sequences(e, n_in);
    return SF_OK;
}

}  // namespace

int sf_embed(sf_engine *e, const int32_t *tokens, uint32_t n_tokens, const sf_embed_input *inputs,
             uint32_t n_inputs, float *out, size_t out_cap) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    e->err.clear();
    e->has_fault = false;
    if (int rc = check_embed(e, tokens, n_tokens, inputs, n_inputs, out, out_cap)) {
        return rc;
    }
    return sf_guard([&] { return embed(e, tokens, inputs, n_inputs, out); },
                    [&](const char *msg) {
                        // The sequences may hold half a batch: empty them so
                        // the next call starts clean.
                        sf_guard([&] { clear_sequences(e, n_inputs); return 0; }, [](const char *) { return 0; });
                        return sf_fail(e, SF_ERR_EXCEPTION, "embed: %s", msg);
                    });
}
