// internal.h — the engine's private state, shared by the native sources.
#ifndef SUPERFLUID_INTERNAL_H
#define SUPERFLUID_INTERNAL_H

#include <cstdarg>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "llama.h"
#include "superfluid.h"

// The most top-N logprobs a lane may ask for per token (OpenAI caps at 20).
constexpr int32_t SF_MAX_LOGPROBS = 20;

struct sf_lane {
    uint32_t tag = 0;
    int32_t seq = -1;
    std::vector<llama_token> prompt;
    uint32_t prefilled = 0;    // prompt tokens in the sequence
    uint32_t n_past = 0;       // tokens in the sequence
    uint32_t generated = 0;    // tokens sampled since admission
    uint32_t max_tokens = 0;
    llama_token pending = -1;  // sampled, not yet fed back
    uint32_t finish = SF_FINISH_NONE;
    int32_t status = SF_OK;
    int32_t n_logprobs = 0;
    // Greedy lanes without penalties or bias take the argmax of the raw
    // logits directly: building a vocabulary-sized candidate array per
    // token is what makes llama.cpp's sampler chain expensive.
    bool plain_greedy = true;
    llama_sampler *chain = nullptr;

    // Per-tick bookkeeping.
    uint64_t touched_tick = 0;
    uint32_t rounds = 0;        // tokens this lane may emit this tick
    uint32_t emitted = 0;       // tokens emitted this tick
};

struct sf_engine {
    llama_model *model = nullptr;
    llama_context *ctx = nullptr;
    const llama_vocab *vocab = nullptr;
    llama_memory_t mem = nullptr;

    int32_t n_ctx = 0;
    int32_t n_seq_max = 0;
    int32_t n_batch = 0;
    int32_t max_lanes = 0;
    int32_t n_vocab = 0;
    int32_t kv_type = SF_KV_F16;
    uint8_t model_id[32] = {};

    std::unordered_map<uint32_t, sf_lane> lanes;
    std::vector<int64_t> seq_lane;  // sequence -> lane tag, or -1

    llama_batch batch = {};
    std::vector<sf_lane *> row_lane;  // batch row -> lane sampling there, or null

    std::vector<int32_t> eog;
    std::string chat_template;
    std::string arch;
    int64_t kv_bytes_per_token = 0;

    int32_t yield = 0;
    uint64_t tick_no = 0;
    std::string err;

    // Scratch reused across ticks so a steady-state tick does not allocate.
    std::vector<sf_lane *> touched;
    std::vector<std::pair<float, int32_t>> top_scratch;
};

// Records a formatted error message on the engine and returns code.
int sf_fail(sf_engine *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Builds the sampler chain of a lane from its parameters.
int sf_lane_init_sampling(sf_engine *e, sf_lane *lane, const sf_admit *a, const sf_logit_bias *bias);

int64_t sf_now_ns();

#endif
