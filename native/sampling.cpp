// sampling.cpp — a lane's sampler: llama.cpp's bias, penalty and truncation
// samplers, then our own draw keyed by position.
//
// The draw for the token at position n of a sequence uses a random number
// that depends only on (seed, n), never on how many draws came before: a
// lane preempted and re-admitted with its reply so far appended to its
// prompt samples the same continuation it would have.
#include <algorithm>
#include <cmath>

#include "internal.h"

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A uniform number in [0, 1) for the token at position pos.
double position_uniform(uint64_t seed, uint32_t pos) {
    uint64_t h = splitmix64(splitmix64(seed) ^ ((uint64_t)pos * 0xD1B54A32D192ED03ull));
    return (double)(h >> 11) * 0x1.0p-53;
}

bool finite_in(float v, float lo, float hi) { return std::isfinite(v) && v >= lo && v <= hi; }

// Why a lane's sampling parameters are refused, or null. Greedy lanes
// ignore the truncation samplers, but their values are still checked so a
// request is refused the same whatever its temperature.
const char *sampling_refusal(const sf_sampling &s) {
    if (!std::isfinite(s.temperature)) {
        return "temperature is not finite";
    }
    if (s.top_k < 0) {
        return "top_k is negative";
    }
    if (!finite_in(s.top_p, 0.0f, 1.0f) || s.top_p == 0.0f) {
        return "top_p outside (0, 1]";
    }
    if (!finite_in(s.min_p, 0.0f, 1.0f)) {
        return "min_p outside [0, 1]";
    }
    if (!std::isfinite(s.repeat_penalty) || s.repeat_penalty <= 0.0f) {
        return "repeat_penalty is not a positive finite number";
    }
    if (!finite_in(s.frequency_penalty, -SF_MAX_PENALTY, SF_MAX_PENALTY) ||
        !finite_in(s.presence_penalty, -SF_MAX_PENALTY, SF_MAX_PENALTY)) {
        return "frequency or presence penalty outside [-1e6, 1e6]";
    }
    if (s.penalty_last_n < -1) {
        return "penalty_last_n below -1";
    }
    return nullptr;
}

// Mirrors engine.BansEveryToken: every token of the vocabulary gets -inf.
bool bans_every_token(sf_engine *e, const sf_logit_bias *bias, uint32_t n) {
    if (e->n_vocab <= 0 || n < (uint32_t)e->n_vocab) {
        return false;
    }
    auto &banned = e->banned_scratch;
    banned.assign((size_t)e->n_vocab, 0);
    int32_t count = 0;
    for (uint32_t i = 0; i < n; i++) {
        const sf_logit_bias &b = bias[i];
        if (std::isinf(b.bias) && b.bias < 0 && !banned[(size_t)b.token]) {
            banned[(size_t)b.token] = 1;
            count++;
        }
    }
    return count == e->n_vocab;
}

llama_token argmax_cand(const llama_token_data_array &c) {
    size_t best = 0;
    for (size_t i = 1; i < c.size; i++) {
        if (c.data[i].logit > c.data[best].logit) {
            best = i;
        }
    }
    return c.data[best].id;
}

// Draws from the softmax of the candidates with u in [0, 1). Candidates at
// +inf (a temperature-scaled huge logit) share all the mass; if none is
// above -inf there is nothing to sample and the first candidate is taken
// (validation refuses a bias that bans everything, so this is a backstop).
llama_token draw(const llama_token_data_array &c, double u) {
    float mx = -INFINITY;
    size_t n_inf = 0;
    for (size_t i = 0; i < c.size; i++) {
        mx = std::max(mx, c.data[i].logit);
        n_inf += std::isinf(c.data[i].logit) && c.data[i].logit > 0 ? 1 : 0;
    }
    if (!(mx > -INFINITY)) {
        return c.data[0].id;
    }
    if (n_inf > 0) {
        size_t k = std::min(n_inf - 1, (size_t)(u * (double)n_inf));
        for (size_t i = 0; i < c.size; i++) {
            if (std::isinf(c.data[i].logit) && c.data[i].logit > 0 && k-- == 0) {
                return c.data[i].id;
            }
        }
    }
    double sum = 0;
    for (size_t i = 0; i < c.size; i++) {
        sum += std::exp((double)c.data[i].logit - (double)mx);
    }
    double target = u * sum, run = 0;
    size_t last = 0;
    for (size_t i = 0; i < c.size; i++) {
        double w = std::exp((double)c.data[i].logit - (double)mx);
        if (w > 0) {
            last = i;
        }
        run += w;
        if (run > target && w > 0) {
            return c.data[i].id;
        }
    }
    return c.data[last].id;  // rounding left the target past the sum
}

}  // namespace

int sf_lane_build_sampling(sf_engine *e, sf_lane *l, const sf_admit *a, const sf_logit_bias *bias) {
    sf_sampling s = a->sampling;
    if (!(s.temperature >= SF_MIN_TEMPERATURE)) {
        s.temperature = 0;  // greedy, as engine.Sampling.Normalize makes it
    }
    if (const char *why = sampling_refusal(s)) {
        return sf_fail_lane(e, a->lane, SF_ERR_INVALID, "admit lane %u: sampling refused: %s", a->lane, why);
    }
    for (uint32_t i = 0; i < a->bias_len; i++) {
        const sf_logit_bias &b = bias[i];
        if (b.token < 0 || b.token >= e->n_vocab || std::isnan(b.bias)) {
            return sf_fail_lane(e, a->lane, SF_ERR_INVALID, "admit lane %u: logit bias for token %d is invalid",
                                a->lane, b.token);
        }
    }
    if (bans_every_token(e, bias, a->bias_len)) {
        return sf_fail_lane(e, a->lane, SF_ERR_INVALID, "admit lane %u: the logit bias bans every token", a->lane);
    }
    int32_t last_n = s.penalty_last_n < 0 ? e->n_ctx : std::min(s.penalty_last_n, e->n_ctx);
    bool penalties = last_n != 0 &&
                     (s.repeat_penalty != 1.0f || s.frequency_penalty != 0.0f || s.presence_penalty != 0.0f);
    l->greedy = s.temperature == 0.0f;
    l->seed = s.seed;
    l->plain_greedy = l->greedy && !penalties && a->bias_len == 0;
    if (l->plain_greedy) {
        return SF_OK;
    }
    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = true;
    llama_sampler *chain = llama_sampler_chain_init(cp);
    if (chain == nullptr) {
        return sf_fail_lane(e, a->lane, SF_ERR_INVALID, "lane %u: cannot create a sampler chain", a->lane);
    }
    l->chain = chain;  // owned from here on, so a throw below cannot leak it
    if (a->bias_len > 0) {
        auto &b = e->bias_scratch;
        b.resize(a->bias_len);
        for (uint32_t i = 0; i < a->bias_len; i++) {
            float v = bias[i].bias;
            if (!(std::isinf(v) && v < 0)) {
                v = std::clamp(v, -SF_MAX_BIAS, SF_MAX_BIAS);
            }
            b[i] = llama_logit_bias{bias[i].token, v};
        }
        llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(e->n_vocab, (int32_t)a->bias_len, b.data()));
    }
    if (penalties) {
#if SF_LLAMA_UPSTREAM
        llama_sampler_chain_add(chain, llama_sampler_init_penalties(e->n_vocab, last_n, s.repeat_penalty,
                                                                    s.frequency_penalty, s.presence_penalty));
#else
        llama_sampler_chain_add(chain, llama_sampler_init_penalties(last_n, s.repeat_penalty, s.frequency_penalty,
                                                                    s.presence_penalty));
#endif
        // Penalties look back over the prompt as well as the reply.
        for (llama_token t : l->prompt) {
            llama_sampler_accept(chain, t);
        }
    }
    if (!l->greedy) {
        if (s.top_k > 0) {
            llama_sampler_chain_add(chain, llama_sampler_init_top_k(s.top_k));
        }
        if (s.top_p < 1.0f) {
            llama_sampler_chain_add(chain, llama_sampler_init_top_p(s.top_p, 1));
        }
        if (s.min_p > 0.0f) {
            llama_sampler_chain_add(chain, llama_sampler_init_min_p(s.min_p, 1));
        }
        llama_sampler_chain_add(chain, llama_sampler_init_temp(s.temperature));
    }
    return SF_OK;
}

namespace {

// Picks a token from a row's logits through the lane's chain (when it has
// one), over the whole vocabulary or, with masked, over what the grammar
// allows; -1 when no candidate is left.
llama_token pick(sf_engine *e, sf_lane *l, const float *logits, bool masked) {
    auto &cand = e->cand;
    for (int32_t t = 0; t < e->n_vocab; t++) {
        float v = logits[t];
        v = std::isnan(v) ? -INFINITY : std::clamp(v, -SF_MAX_LOGIT, SF_MAX_LOGIT);
        cand[(size_t)t] = llama_token_data{t, v, 0.0f};
    }
    llama_token_data_array c = {cand.data(), (size_t)e->n_vocab, -1, false};
    if (masked) {
        sf_grammar_mask(&l->grammar, &c);
    }
    if (l->chain != nullptr) {
        llama_sampler_apply(l->chain, &c);
    }
    if (masked) {
        bool any = false;
        for (size_t i = 0; i < c.size && !any; i++) {
            any = c.data[i].logit > -INFINITY;
        }
        if (!any) {
            return -1;
        }
    }
    return l->greedy ? argmax_cand(c) : draw(c, position_uniform(l->seed, l->n_past));
}

llama_token argmax_logits(const float *logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    return best;
}

}  // namespace

// A grammar lane first takes the choice it would make unconstrained and
// asks the grammar about that one token; only a refusal pays for masking
// the whole vocabulary (most tokens of a model that follows the format
// pass). The draw is keyed by position either way, so a resumed lane
// repeats itself.
llama_token sf_lane_sample(sf_engine *e, sf_lane *l, const float *logits, sf_timings *t) {
    llama_token tok = l->chain == nullptr && l->greedy ? argmax_logits(logits, e->n_vocab) : pick(e, l, logits, false);
    if (l->grammar.g != nullptr && !l->grammar.awaiting) {
        if (sf_grammar_allows(&l->grammar, tok)) {
            t->grammar_fast++;
        } else {
            t->grammar_masked++;
            tok = pick(e, l, logits, true);
            if (tok < 0) {
                return -1;
            }
        }
    }
    if (l->chain != nullptr) {
        llama_sampler_accept(l->chain, tok);
    }
    return tok;
}

void sf_lane_release(sf_lane *l) {
    llama_sampler_free(l->chain);
    l->chain = nullptr;
    l->grammar.reset();
}
