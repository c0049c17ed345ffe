// tick.cpp — sf_tick: validate a plan, then run it as one mixed batch.
//
// A tick is one step: every prefill chunk beside one token per decoding
// lane, in a single llama_decode. The scheduler plans every step, so the
// events are that step's tokens, finishes and timing, and nothing runs
// between the caller's plans.
//
// Validation does everything that can fail — checks, the admitted lanes'
// prompt copies and sampler chains, event capacity — so that applying a plan
// cannot fail and a refused plan leaves the engine exactly as it was.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "internal.h"

namespace {

// Frees the chains of lanes validation staged and the tick did not admit.
void drop_staged(sf_engine *e) {
    for (sf_lane &l : e->staged) {
        sf_lane_release(&l);
    }
    e->staged.clear();
}

bool retired_in_plan(const sf_plan *p, uint32_t tag) {
    for (uint32_t i = 0; i < p->n_retires; i++) {
        if (p->retires[i] == tag) {
            return true;
        }
    }
    return false;
}

const sf_admit *admitted_in_plan(const sf_plan *p, uint32_t tag) {
    for (uint32_t i = 0; i < p->n_admits; i++) {
        if (p->admits[i].lane == tag) {
            return &p->admits[i];
        }
    }
    return nullptr;
}

// Checks one admission against the engine and the plan.
int check_admit(sf_engine *e, const sf_plan *p, const sf_admit &a) {
    if (a.seq < 0 || a.seq >= e->n_seq_max) {
        return sf_fail_lane(e, a.lane, SF_ERR_SEQ_RANGE, "admit lane %u: sequence %d outside [0, %d)", a.lane,
                            a.seq, e->n_seq_max);
    }
    int64_t owner = e->seq_lane[(size_t)a.seq];
    if (owner >= 0 && !retired_in_plan(p, (uint32_t)owner)) {
        return sf_fail_lane(e, a.lane, SF_ERR_SEQ_BUSY, "admit lane %u: sequence %d carries lane %lld", a.lane,
                            a.seq, (long long)owner);
    }
    if (a.prompt_len == 0) {
        return sf_fail_lane(e, a.lane, SF_ERR_INVALID, "admit lane %u: empty prompt", a.lane);
    }
    if ((uint64_t)a.prompt_off + a.prompt_len > p->n_tokens) {
        return sf_fail_lane(e, a.lane, SF_ERR_INVALID, "admit lane %u: prompt [%u, +%u) outside the plan's %u tokens",
                            a.lane, a.prompt_off, a.prompt_len, p->n_tokens);
    }
    if (a.prompt_len > (uint32_t)e->n_ctx) {
        return sf_fail_lane(e, a.lane, SF_ERR_CONTEXT, "admit lane %u: prompt of %u tokens exceeds the context of %d",
                            a.lane, a.prompt_len, e->n_ctx);
    }
    if (a.cached >= a.prompt_len) {
        return sf_fail_lane(e, a.lane, SF_ERR_INVALID,
                            "admit lane %u: %u cached tokens leave nothing of a %u-token prompt to prefill", a.lane,
                            a.cached, a.prompt_len);
    }
    int32_t have = llama_memory_seq_pos_max(e->mem, a.seq) + 1;
    if (have != (int32_t)a.cached) {
        return sf_fail_lane(e, a.lane, SF_ERR_INVALID,
                            "admit lane %u: sequence %d holds %d tokens, the plan says %u are cached", a.lane, a.seq,
                            have, a.cached);
    }
    for (uint32_t i = 0; i < a.prompt_len; i++) {
        int32_t t = p->tokens[a.prompt_off + i];
        if (t < 0 || t >= e->n_vocab) {
            return sf_fail_lane(e, a.lane, SF_ERR_INVALID, "admit lane %u: token %d at %u outside the vocabulary",
                                a.lane, t, i);
        }
    }
    if ((uint64_t)a.bias_off + a.bias_len > p->n_biases) {
        return sf_fail_lane(e, a.lane, SF_ERR_INVALID, "admit lane %u: logit bias outside the plan", a.lane);
    }
    if (a.n_logprobs < 0 || a.n_logprobs > SF_MAX_LOGPROBS) {
        return sf_fail_lane(e, a.lane, SF_ERR_INVALID, "admit lane %u: logprobs %d outside [0, %d]", a.lane,
                            a.n_logprobs, SF_MAX_LOGPROBS);
    }
    return SF_OK;
}

// Checks a decode's draft: in the plan, in the vocabulary, within the
// context, and on a model whose sequences can be cut back after it.
int check_draft(sf_engine *e, const sf_plan *p, const sf_decode &d, const sf_lane *l) {
    if (d.draft_len == 0) {
        if (d.synth_accept > 0) {
            return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: synthetic accepts without a draft", d.lane);
        }
        return SF_OK;
    }
    if (const char *why = sf_drafts_refused(e)) {
        return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: a draft on a model that refuses drafts: %s",
                            d.lane, why);
    }
    // Recurrent state rolls back at most the snapshots it keeps.
    if (e->partial == SF_PARTIAL_RECURRENT && d.draft_len > (uint32_t)e->n_rs_seq) {
        return sf_fail_lane(e, d.lane, SF_ERR_INVALID,
                            "decode lane %u: a draft of %u passes the %d positions recurrent state rolls back", d.lane,
                            d.draft_len, e->n_rs_seq);
    }
    if ((uint64_t)d.draft_off + d.draft_len > p->n_tokens) {
        return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: draft [%u, +%u) outside the plan's %u tokens",
                            d.lane, d.draft_off, d.draft_len, p->n_tokens);
    }
    // The draft's rows sit at n_past + 1 .. n_past + draft_len.
    if ((uint64_t)l->n_past + d.draft_len >= (uint64_t)e->n_ctx) {
        return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: a draft of %u passes the context of %d",
                            d.lane, d.draft_len, e->n_ctx);
    }
    for (uint32_t i = 0; i < d.draft_len; i++) {
        int32_t t = p->tokens[d.draft_off + i];
        if (t < 0 || t >= e->n_vocab) {
            return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: draft token %d outside the vocabulary",
                                d.lane, t);
        }
    }
    if (d.synth_accept > d.draft_len) {
        return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: %u synthetic accepts of a draft of %u",
                            d.lane, d.synth_accept, d.draft_len);
    }
    if (d.synth_accept > 0 && l->grammar.g != nullptr) {
        return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: synthetic accepts on a lane with a grammar",
                            d.lane);
    }
    return SF_OK;
}

// Builds an admission's lane: its prompt copy and sampler chain.
int stage_admit(sf_engine *e, const sf_plan *p, const sf_admit &a) {
    e->staged.emplace_back();  // reserved for max_lanes: cannot allocate
    sf_lane &l = e->staged.back();
    l.tag = a.lane;
    l.seq = a.seq;
    l.prompt.assign(p->tokens + a.prompt_off, p->tokens + a.prompt_off + a.prompt_len);
    l.prefilled = a.cached;
    l.n_past = a.cached;
    l.max_tokens = a.max_tokens;
    l.n_logprobs = a.n_logprobs;
    if (e->inject == SF_INJECT_TICK) {
        e->inject = SF_INJECT_NONE;
        throw std::bad_alloc();
    }
    if (int rc = sf_lane_build_sampling(e, &l, &a, p->biases + a.bias_off)) {
        return rc;
    }
    return sf_lane_build_grammar(e, &l, &a);
}

// Checks the whole plan before anything changes, then stages its
// admissions, so a malformed plan leaves the engine exactly as it was.
int validate(sf_engine *e, const sf_plan *p, sf_events *ev) {
    if ((p->n_retires > 0 && p->retires == nullptr) || (p->n_admits > 0 && p->admits == nullptr) ||
        (p->n_prefills > 0 && p->prefills == nullptr) || (p->n_decodes > 0 && p->decodes == nullptr) ||
        (p->n_tokens > 0 && p->tokens == nullptr) || (p->n_biases > 0 && p->biases == nullptr)) {
        return sf_fail(e, SF_ERR_INVALID, "plan array with a count but no data");
    }
    if ((ev->cap_tokens > 0 && ev->tokens == nullptr) || (ev->cap_top > 0 && ev->top == nullptr) ||
        (ev->cap_lanes > 0 && ev->lanes == nullptr)) {
        return sf_fail(e, SF_ERR_INVALID, "event array with a capacity but no storage");
    }
    if (int rc = sf_lora_check(e, p)) {
        return rc;
    }
    for (uint32_t i = 0; i < p->n_retires; i++) {
        if (sf_find_lane(e, p->retires[i]) == nullptr) {
            return sf_fail_lane(e, p->retires[i], SF_ERR_UNKNOWN_LANE, "retire: unknown lane %u", p->retires[i]);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (p->retires[j] == p->retires[i]) {
                return sf_fail_lane(e, p->retires[i], SF_ERR_INVALID, "retire: lane %u twice", p->retires[i]);
            }
        }
    }
    size_t live = (size_t)e->n_live - p->n_retires;
    if (live + p->n_admits > (size_t)e->max_lanes) {
        return sf_fail(e, SF_ERR_INVALID, "admit: %zu lanes would exceed the engine's %d", live + p->n_admits,
                       e->max_lanes);
    }
    for (uint32_t i = 0; i < p->n_admits; i++) {
        const sf_admit &a = p->admits[i];
        if (sf_find_lane(e, a.lane) != nullptr && !retired_in_plan(p, a.lane)) {
            return sf_fail_lane(e, a.lane, SF_ERR_LANE_EXISTS, "admit: lane %u is already admitted", a.lane);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (p->admits[j].lane == a.lane) {
                return sf_fail_lane(e, a.lane, SF_ERR_LANE_EXISTS, "admit: lane %u twice", a.lane);
            }
            if (p->admits[j].seq == a.seq) {
                return sf_fail_lane(e, a.lane, SF_ERR_SEQ_BUSY, "admit: sequence %d twice", a.seq);
            }
        }
        if (int rc = check_admit(e, p, a)) {
            return rc;
        }
    }
    // What the step carries and samples, to check the batch and the events.
    uint64_t rows = 0, samples = 0, top = 0;
    for (uint32_t i = 0; i < p->n_prefills; i++) {
        const sf_prefill &f = p->prefills[i];
        const sf_admit *a = admitted_in_plan(p, f.lane);
        sf_lane *l = a == nullptr && !retired_in_plan(p, f.lane) ? sf_find_lane(e, f.lane) : nullptr;
        if (a == nullptr && l == nullptr) {
            return sf_fail_lane(e, f.lane, SF_ERR_UNKNOWN_LANE, "prefill: unknown lane %u", f.lane);
        }
        uint32_t len = a != nullptr ? a->prompt_len : (uint32_t)l->prompt.size();
        uint32_t done = a != nullptr ? a->cached : l->prefilled;
        if (f.count == 0 || (uint64_t)f.offset + f.count > len) {
            return sf_fail_lane(e, f.lane, SF_ERR_PAST_PROMPT, "prefill lane %u: [%u, +%u) outside its %u-token prompt",
                                f.lane, f.offset, f.count, len);
        }
        if (f.offset != done) {
            return sf_fail_lane(e, f.lane, SF_ERR_INVALID, "prefill lane %u: starts at %u, its prompt continues at %u",
                                f.lane, f.offset, done);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (p->prefills[j].lane == f.lane) {
                return sf_fail_lane(e, f.lane, SF_ERR_INVALID, "prefill: lane %u twice", f.lane);
            }
        }
        rows += f.count;
        if (f.offset + f.count == len) {
            samples++;
            top += (uint64_t)(a != nullptr ? a->n_logprobs : l->n_logprobs);
        }
    }
    for (uint32_t i = 0; i < p->n_decodes; i++) {
        const sf_decode &d = p->decodes[i];
        const sf_admit *a = admitted_in_plan(p, d.lane);
        sf_lane *l = a == nullptr && !retired_in_plan(p, d.lane) ? sf_find_lane(e, d.lane) : nullptr;
        if (a == nullptr && l == nullptr) {
            return sf_fail_lane(e, d.lane, SF_ERR_UNKNOWN_LANE, "decode: unknown lane %u", d.lane);
        }
        if (a != nullptr) {
            return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: admitted in this plan, not prefilled",
                                d.lane);
        }
        if (l->finish != SF_FINISH_NONE) {
            return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: the lane has finished", d.lane);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (p->decodes[j].lane == d.lane) {
                return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode: lane %u twice", d.lane);
            }
        }
        if (l->pending < 0) {
            return sf_fail_lane(e, d.lane, SF_ERR_INVALID, "decode lane %u: its prompt is not prefilled", d.lane);
        }
        if (int rc = check_draft(e, p, d, l)) {
            return rc;
        }
        rows += 1 + (uint64_t)d.draft_len;
        samples += 1 + (uint64_t)d.draft_len;
        top += (1 + (uint64_t)d.draft_len) * (uint64_t)l->n_logprobs;
    }
    if (rows > (uint64_t)e->n_batch) {
        return sf_fail(e, SF_ERR_BATCH, "step of %llu tokens exceeds the batch of %d", (unsigned long long)rows,
                       e->n_batch);
    }
    size_t touched = p->n_admits + p->n_prefills + p->n_decodes;
    if (ev->cap_lanes < std::min(touched, (size_t)e->max_lanes)) {
        return sf_fail(e, SF_ERR_BUFFER, "events hold %u lanes, the plan may touch %zu", ev->cap_lanes, touched);
    }
    if (samples > ev->cap_tokens || top > ev->cap_top) {
        return sf_fail(e, SF_ERR_BUFFER, "events hold %u tokens and %u logprobs, the step samples %llu and %llu",
                       ev->cap_tokens, ev->cap_top, (unsigned long long)samples, (unsigned long long)top);
    }
    // Everything else is sound: stage the admissions (the only part that
    // allocates, and the sampling checks).
    for (uint32_t i = 0; i < p->n_admits; i++) {
        if (int rc = stage_admit(e, p, p->admits[i])) {
            return rc;
        }
    }
    return SF_OK;
}

void touch(sf_engine *e, sf_lane *l) {
    if (l->touched_tick != e->tick_no) {
        l->touched_tick = e->tick_no;
        e->touched.push_back(l);  // reserved for max_lanes: cannot allocate
    }
}

// Retires and admits; validation has made sure nothing here can fail.
void apply_admits(sf_engine *e, const sf_plan *p) {
    for (uint32_t i = 0; i < p->n_retires; i++) {
        sf_lane *l = sf_find_lane(e, p->retires[i]);
        sf_lane_release(l);
        e->seq_lane[(size_t)l->seq] = -1;
        l->used = false;
        e->n_live--;
    }
    size_t slot = 0;
    for (sf_lane &staged : e->staged) {
        while (e->slots[slot].used) {
            slot++;
        }
        sf_lane &l = e->slots[slot];
        l = std::move(staged);
        staged.chain = nullptr;
        l.used = true;
        e->seq_lane[(size_t)l.seq] = l.tag;
        e->n_live++;
        touch(e, &l);
    }
    e->staged.clear();
}

void add_row(sf_engine *e, llama_token tok, int32_t pos, int32_t seq, sf_lane *sampler) {
    e->row_lane[(size_t)e->batch.n_tokens] = sampler;
    sf_batch_add(e->batch, tok, pos, seq, sampler != nullptr);
}

// Fills in the top-N logprobs of one row and returns the sampled token's.
float logprobs(sf_engine *e, const float *logits, llama_token tok, int32_t n_top, sf_events *ev, sf_token_event *te) {
    float mx = logits[0];
    for (int32_t i = 1; i < e->n_vocab; i++) {
        mx = std::max(mx, logits[i]);
    }
    double sum = 0;
    for (int32_t i = 0; i < e->n_vocab; i++) {
        sum += std::exp((double)(logits[i] - mx));
    }
    float lse = mx + (float)std::log(sum);
    auto &top = e->top_scratch;
    top.clear();
    for (int32_t i = 0; i < e->n_vocab && n_top > 0; i++) {
        if ((int32_t)top.size() == n_top && logits[i] <= top.back().first) {
            continue;
        }
        auto at = std::upper_bound(top.begin(), top.end(), std::make_pair(logits[i], i),
                                   [](const std::pair<float, int32_t> &a, const std::pair<float, int32_t> &b) {
                                       return a.first > b.first || (a.first == b.first && a.second < b.second);
                                   });
        top.insert(at, std::make_pair(logits[i], i));
        if ((int32_t)top.size() > n_top) {
            top.pop_back();
        }
    }
    uint32_t room = ev->cap_top - ev->n_top;
    uint32_t n = std::min<uint32_t>((uint32_t)top.size(), room);
    te->top_off = ev->n_top;
    te->top_len = n;
    for (uint32_t i = 0; i < n; i++) {
        ev->top[ev->n_top++] = sf_top_logprob{top[i].second, top[i].first - lse};
    }
    return logits[tok] - lse;
}

llama_token argmax(const float *logits, int32_t n) {
    int32_t best = 0;
    float bv = logits[0];
    for (int32_t i = 1; i < n; i++) {
        if (logits[i] > bv) {
            bv = logits[i];
            best = i;
        }
    }
    return best;
}

// Advances a lane's grammar over its sampled token; true when the grammar
// is complete. A trigger whose text the grammar refuses throws inside
// llama.cpp: that ends this lane alone, not the tick.
bool grammar_accept(sf_engine *e, sf_lane *l, llama_token tok) {
    try {
        return sf_grammar_accept(e, &l->grammar, tok);
    } catch (const std::exception &) {
        l->finish = SF_FINISH_ERROR;
        l->status = SF_ERR_GRAMMAR;
        return false;
    }
}

void commit_token(sf_engine *e, int32_t row, sf_lane *l, llama_token tok, sf_events *ev);

void sample_row(sf_engine *e, int32_t row, sf_lane *l, sf_events *ev) {
    const float *logits = llama_get_logits_ith(e->ctx, row);
    bool grammar = l->grammar.g != nullptr;
    llama_token tok = l->plain_greedy && !grammar ? argmax(logits, e->n_vocab) : sf_lane_sample(e, l, logits, &ev->timings);
    if (tok < 0) {
        // The grammar allows no token the vocabulary (and the bias) leave:
        // the lane ends without one; its lane event says why.
        l->finish = SF_FINISH_ERROR;
        l->status = SF_ERR_GRAMMAR;
        return;
    }
    commit_token(e, row, l, tok, ev);
}

// Reports tok as the lane's token at row and advances the lane over it:
// logprobs, the grammar, the finish checks; or pending for the next step.
void commit_token(sf_engine *e, int32_t row, sf_lane *l, llama_token tok, sf_events *ev) {
    const float *logits = llama_get_logits_ith(e->ctx, row);
    bool grammar = l->grammar.g != nullptr;
    sf_token_event &te = ev->tokens[ev->n_tokens++];
    te = sf_token_event{l->tag, tok, 0.0f, 0, 0, SF_FINISH_NONE};
    if (l->n_logprobs > 0) {
        te.logprob = logprobs(e, logits, tok, l->n_logprobs, ev, &te);
    }
    l->generated++;
    if (llama_vocab_is_eog(e->vocab, tok)) {
        l->finish = SF_FINISH_EOG;
    } else if (grammar && grammar_accept(e, l, tok)) {
        l->finish = SF_FINISH_GRAMMAR;
    } else if (l->finish != SF_FINISH_NONE) {
        // the grammar failed the lane
    } else if (l->max_tokens > 0 && l->generated >= l->max_tokens) {
        l->finish = SF_FINISH_LENGTH;
    } else if (l->n_past >= (uint32_t)e->n_ctx) {
        l->finish = SF_FINISH_CONTEXT;
    } else {
        l->pending = tok;
    }
    te.finish = l->finish;
}

// Samples a drafted lane's rows, from its fed token's at row on, in order,
// each as a plain decode would sample it at that position, while the token
// sampled is the draft token the next row fed (or, with synth_accept, takes
// that many draft tokens as they are and samples the row after them); then
// cuts the rows not accepted out of the sequence. Returns the draft rows
// consumed (the caller skips them). The draft pointer is cleared: it
// points into the plan.
int32_t verify_draft(sf_engine *e, int32_t row, sf_lane *l, sf_events *ev) {
    uint32_t n = l->draft_len, synth = l->synth_accept;
    const int32_t *draft = l->draft;
    l->draft = nullptr;
    l->draft_len = 0;
    l->synth_accept = 0;
    ev->timings.draft_tokens += n;
    for (uint32_t j = 0;; j++) {
        if (j < synth) {
            // Committed unverified (benchmarks); penalties still see it.
            if (l->chain != nullptr) {
                llama_sampler_accept(l->chain, draft[j]);
            }
            commit_token(e, row + (int32_t)j, l, draft[j], ev);
        } else {
            sample_row(e, row + (int32_t)j, l, ev);
        }
        if (j == n || l->finish != SF_FINISH_NONE || l->pending != draft[j] || (synth > 0 && j >= synth)) {
            break;
        }
        // The token sampled is the draft token row j + 1 fed: it is in
        // the sequence already, and that row's logits come next.
        l->pending = -1;
        l->n_past++;
        ev->timings.draft_accepted++;
    }
    // Positions n_past on hold drafts the lane did not accept.
    if (!llama_memory_seq_rm(e->mem, l->seq, (llama_pos)l->n_past, -1)) {
        l->finish = SF_FINISH_ERROR;
        l->status = SF_ERR_UNSUPPORTED;
        l->pending = -1;
    }
    return (int32_t)n;
}

// Undoes what a failed step may have left in the KV cache.
void rollback_step(sf_engine *e) {
    for (int32_t i = 0; i < e->batch.n_tokens; i++) {
        llama_memory_seq_rm(e->mem, e->batch.seq_id[i][0], e->batch.pos[i], -1);
    }
}

// The plan's one step; validation has made sure the batch and the events
// have room for it.
int run_step(sf_engine *e, const sf_plan *p, sf_events *ev) {
    e->batch.n_tokens = 0;
    for (uint32_t i = 0; i < p->n_prefills; i++) {
        const sf_prefill &f = p->prefills[i];
        sf_lane *l = sf_find_lane(e, f.lane);
        touch(e, l);
        bool completes = f.offset + f.count == l->prompt.size();
        for (uint32_t j = 0; j < f.count; j++) {
            bool last = completes && j + 1 == f.count;
            add_row(e, l->prompt[f.offset + j], (int32_t)(f.offset + j), l->seq, last ? l : nullptr);
        }
    }
    for (uint32_t i = 0; i < p->n_decodes; i++) {
        const sf_decode &d = p->decodes[i];
        sf_lane *l = sf_find_lane(e, d.lane);
        touch(e, l);
        add_row(e, l->pending, (int32_t)l->n_past, l->seq, l);
        l->draft = p->tokens + d.draft_off;
        l->draft_len = d.draft_len;
        l->synth_accept = d.synth_accept;
        for (uint32_t j = 0; j < d.draft_len; j++) {
            add_row(e, l->draft[j], (int32_t)(l->n_past + 1 + j), l->seq, l);
        }
    }
    // Before the early return: a step whose only rows are media rows
    // (sf_prefill_rows, right after this tick) runs them under the step's
    // adapter set too.
    sf_lora_apply(e, p);
    if (e->batch.n_tokens == 0) {
        return SF_OK;  // retires and admits only
    }
    int64_t t0 = sf_now_ns();
    int32_t rc;
    {
        sf_compute_lock compute(e);
        rc = llama_decode(e->ctx, e->batch);
    }
    if (rc != 0) {
        rollback_step(e);
        int code = rc == 1 ? SF_ERR_KV_FULL : SF_ERR_DECODE;
        for (int32_t i = 0; i < e->batch.n_tokens; i++) {
            if (sf_lane *l = e->row_lane[(size_t)i]; l != nullptr) {
                l->status = code;
                l->draft = nullptr;
                l->draft_len = 0;
            }
        }
        return sf_fail(e, code, rc == 1 ? "the KV cache has no room for a step of %d tokens"
                                        : "llama_decode failed on a step of %d tokens",
                       e->batch.n_tokens);
    }
    ev->timings.step_ns = sf_now_ns() - t0;
    // The step is in the cache: advance every lane it carried.
    for (uint32_t i = 0; i < p->n_prefills; i++) {
        sf_lane *l = sf_find_lane(e, p->prefills[i].lane);
        l->prefilled += p->prefills[i].count;
        l->n_past += p->prefills[i].count;
        ev->timings.prefill_tokens += p->prefills[i].count;
        // Before the lane's first token joins the sequence: a checkpoint
        // at the prompt's end is what a next turn re-rendering this reply
        // resumes from.
        sf_ckpt_after_prefill(e, l, l->prefilled == l->prompt.size());
    }
    for (int32_t i = 0; i < e->batch.n_tokens; i++) {
        sf_lane *l = e->row_lane[(size_t)i];
        if (l == nullptr) {
            continue;
        }
        if (l->pending >= 0) {
            l->pending = -1;
            l->n_past++;
            ev->timings.decode_tokens++;
        }
        if (l->draft_len > 0) {
            i += verify_draft(e, i, l, ev);
            continue;
        }
        sample_row(e, i, l, ev);
    }
    // The multi-token prediction block follows what the sequences kept;
    // its time is the step's.
    if (e->mtp != nullptr) {
        int64_t t1 = sf_now_ns();
        sf_mtp_follow(e);
        ev->timings.step_ns += sf_now_ns() - t1;
    }
    return SF_OK;
}

void report_lanes(sf_engine *e, sf_events *ev) {
    for (sf_lane *l : e->touched) {
        if (ev->n_lanes == ev->cap_lanes) {
            break;
        }
        ev->lanes[ev->n_lanes++] =
            sf_lane_event{l->tag, l->finish, l->prefilled, l->n_past, l->generated, l->status};
    }
}

// The tick proper; sf_tick wraps it in the exception guard.
int tick(sf_engine *e, const sf_plan *p, sf_events *ev) {
    e->err.clear();
    e->has_fault = false;
    drop_staged(e);
    ev->n_tokens = ev->n_top = ev->n_lanes = 0;
    ev->timings = sf_timings{};
    if (e->pooling != LLAMA_POOLING_TYPE_NONE) {
        // The context computes pooled embeddings, not logits per lane.
        return sf_fail(e, SF_ERR_UNSUPPORTED, "this is an embedding model: it does not generate");
    }
    if (int rc = validate(e, p, ev)) {
        drop_staged(e);
        return rc;
    }
    e->tick_no++;
    e->touched.clear();
    apply_admits(e, p);
    int rc = run_step(e, p, ev);
    report_lanes(e, ev);
    return rc;
}

// After an exception the lanes this tick applied may be half-way through a
// step; end them (the caller retires them) rather than guess their state.
int tick_exception(sf_engine *e, sf_events *ev, const char *msg, uint64_t tick_before) {
    drop_staged(e);
    if (e->tick_no != tick_before) {
        for (sf_lane *l : e->touched) {
            l->status = SF_ERR_EXCEPTION;
            l->finish = SF_FINISH_ERROR;
            l->pending = -1;
            l->draft = nullptr;
            l->draft_len = 0;
        }
        ev->n_lanes = 0;
        report_lanes(e, ev);
    }
    e->has_fault = false;
    return sf_fail(e, SF_ERR_EXCEPTION, "tick: %s", msg);
}

}  // namespace

int sf_tick(sf_engine *e, const sf_plan *p, sf_events *ev) {
    if (e == nullptr || p == nullptr || ev == nullptr) {
        return SF_ERR_INVALID;
    }
    uint64_t tick_before = e->tick_no;
    int rc = sf_guard([&] { return tick(e, p, ev); },
                      [&](const char *msg) { return tick_exception(e, ev, msg, tick_before); });
    ev->has_fault_lane = e->has_fault ? 1 : 0;
    ev->fault_lane = e->has_fault ? e->fault_lane : 0;
    return rc;
}

// Media rows are prefilled by their own llama_decode: a llama_batch carries
// either token ids or embedding rows, never both, so an image span cannot
// share the tick's batch. The scheduler runs it beside the tick, in the
// same step budget.
static int prefill_rows(sf_engine *e, uint32_t lane, const float *rows, uint32_t n_rows, uint32_t width) {
    sf_lane *l = sf_find_lane(e, lane);
    if (l == nullptr) {
        return sf_fail(e, SF_ERR_UNKNOWN_LANE, "prefill rows: unknown lane %u", lane);
    }
    if (width != (uint32_t)llama_model_n_embd_inp(e->model)) {
        return sf_fail(e, SF_ERR_INVALID, "prefill rows: rows of %u floats, the model's are %d", width,
                       llama_model_n_embd_inp(e->model));
    }
    if (n_rows == 0 || n_rows > (uint32_t)e->n_batch) {
        return sf_fail(e, SF_ERR_BATCH, "prefill rows: %u rows, a step carries 1 to %d", n_rows, e->n_batch);
    }
    // The prompt's last row must be a token: the lane samples its first
    // token from it in a tick.
    if ((uint64_t)l->prefilled + n_rows >= l->prompt.size()) {
        return sf_fail(e, SF_ERR_PAST_PROMPT, "prefill rows lane %u: [%u, +%u) reaches the end of its %zu-row prompt",
                       lane, l->prefilled, n_rows, l->prompt.size());
    }
    // The rows run under the adapter set the step's sf_tick applied: the
    // scheduler prefills a lane's rows only in a step of its own set.
    llama_batch b = llama_batch_init((int32_t)n_rows, (int32_t)width, 1);
    struct batch_guard {
        llama_batch &b;
        ~batch_guard() { llama_batch_free(b); }
    } guard{b};
    memcpy(b.embd, rows, (size_t)n_rows * width * sizeof(float));
    for (uint32_t i = 0; i < n_rows; i++) {
        b.pos[i] = (llama_pos)(l->prefilled + i);
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = l->seq;
        b.logits[i] = 0;
    }
    b.n_tokens = (int32_t)n_rows;
    int32_t rc;
    {
        sf_compute_lock compute(e);
        rc = llama_decode(e->ctx, b);
    }
    if (rc != 0) {
        llama_memory_seq_rm(e->mem, l->seq, (llama_pos)l->prefilled, -1);
        return sf_fail(e, rc == 1 ? SF_ERR_KV_FULL : SF_ERR_DECODE, "prefill rows lane %u: llama_decode returned %d",
                       lane, rc);
    }
    l->prefilled += n_rows;
    l->n_past += n_rows;
    sf_ckpt_after_prefill(e, l, false);
    return SF_OK;
}

int sf_prefill_rows(sf_engine *e, uint32_t lane, const float *rows, uint32_t n_rows, uint32_t width) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    e->err.clear();
    e->has_fault = false;
    if (rows == nullptr) {
        return sf_fail(e, SF_ERR_INVALID, "prefill rows: no rows");
    }
    return sf_guard([&] { return prefill_rows(e, lane, rows, n_rows, width); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "prefill rows: %s", msg); });
}
