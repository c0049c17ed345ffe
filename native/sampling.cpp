// sampling.cpp — a lane's sampler chain.
#include "internal.h"

int sf_lane_init_sampling(sf_engine *e, sf_lane *l, const sf_admit *a, const sf_logit_bias *bias) {
    const sf_sampling &s = a->sampling;
    bool penalties = s.penalty_last_n != 0 &&
                     (s.repeat_penalty != 1.0f || s.frequency_penalty != 0.0f || s.presence_penalty != 0.0f);
    bool greedy = s.temperature <= 0.0f;
    l->plain_greedy = greedy && !penalties && a->bias_len == 0;
    if (l->plain_greedy) {
        return SF_OK;
    }
    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = true;
    llama_sampler *chain = llama_sampler_chain_init(cp);
    if (chain == nullptr) {
        return sf_fail(e, SF_ERR_INVALID, "lane %u: cannot create a sampler chain", a->lane);
    }
    if (a->bias_len > 0) {
        static_assert(sizeof(sf_logit_bias) == sizeof(llama_logit_bias), "logit bias layouts differ");
        llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(e->n_vocab, (int32_t)a->bias_len,
                                                                     reinterpret_cast<const llama_logit_bias *>(bias)));
    }
    if (penalties) {
        int32_t last_n = s.penalty_last_n < 0 ? e->n_ctx : s.penalty_last_n;
        llama_sampler_chain_add(chain, llama_sampler_init_penalties(last_n, s.repeat_penalty, s.frequency_penalty,
                                                                    s.presence_penalty));
    }
    if (greedy) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    } else {
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
        // llama.cpp seeds are 32-bit; fold the high half in so every bit counts.
        llama_sampler_chain_add(chain, llama_sampler_init_dist((uint32_t)(s.seed ^ (s.seed >> 32))));
    }
    // Penalties look back over the prompt as well as the reply.
    if (penalties) {
        for (llama_token t : l->prompt) {
            llama_sampler_accept(chain, t);
        }
    }
    l->chain = chain;
    return SF_OK;
}
