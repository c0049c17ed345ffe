// draft.cpp — a second, smaller model's guesses at how lanes continue.
//
// The draft engine is an ordinary engine on the small model that runs no
// ticks. Each lane it drafts for has one of its sequences, whose cells
// hold what the engine last saw of the lane: its history and the drafts
// it fed. A call compares that record with the lane's history now, cuts
// the sequence back to their common prefix (the target rejected what
// follows) and feeds the rest, then drafts greedily. Comparing whole
// histories, rather than trusting the caller to report accepts and
// rejects, keeps a sequence right whatever happened to the lane between
// calls (preempted, resumed, retired and its tag reused).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "internal.h"

namespace {

// llama.cpp's common_speculative_are_compatible: vocabulary sizes may
// differ by this much (padding), and the text of tokens before this id
// (control tokens models rename) is not compared.
constexpr int32_t SF_DRAFT_VOCAB_SLACK = 128;
constexpr int32_t SF_DRAFT_TEXT_FROM = 5;

// One request's progress through a call.
struct draft_work {
    sf_draft_req *req;
    int32_t seq = -1;       // -1: the request gets no draft
    uint32_t fed = 0;       // history tokens in the sequence
    uint32_t max = 0;       // what it may draft, within the context
    bool drafting = false;  // its last row's logits give its next draft token
};

// The sequence lane drafts in: the one it had, else a free one, else the
// least recently used one no request of this call took. -1: none left.
int32_t seq_for(sf_engine *e, uint32_t lane) {
    auto &seqs = e->draft_seqs;
    int32_t best = -1;
    for (int32_t s = 0; s < (int32_t)seqs.size(); s++) {
        if (seqs[(size_t)s].used && seqs[(size_t)s].lane == lane) {
            best = s;
            break;
        }
    }
    if (best < 0) {
        for (int32_t s = 0; s < (int32_t)seqs.size(); s++) {
            const sf_draft_seq &d = seqs[(size_t)s];
            if (d.last_call == e->draft_calls) {
                continue;  // taken by this call
            }
            if (best < 0 || !d.used || (seqs[(size_t)best].used && d.last_call < seqs[(size_t)best].last_call)) {
                best = s;
            }
            if (!d.used) {
                break;
            }
        }
    }
    if (best >= 0) {
        sf_draft_seq &d = seqs[(size_t)best];
        if (!d.used || d.lane != lane) {
            d.used = true;
            d.lane = lane;  // its cells stay: a common prefix is still good
        }
        d.last_call = e->draft_calls;
    }
    return best;
}

// Decodes the batch; on failure cuts its rows back out of the cache.
int decode(sf_engine *e) {
    int32_t rc;
    {
        sf_compute_lock compute(e);
        rc = llama_decode(e->ctx, e->batch);
    }
    if (rc == 0) {
        return SF_OK;
    }
    for (int32_t i = 0; i < e->batch.n_tokens; i++) {
        llama_memory_seq_rm(e->mem, e->batch.seq_id[i][0], e->batch.pos[i], -1);
    }
    return sf_fail(e, rc == 1 ? SF_ERR_KV_FULL : SF_ERR_DECODE, "draft: llama_decode of %d rows: %d",
                   e->batch.n_tokens, rc);
}

// Takes the draft token a row's logits give w: the most likely one, when
// the target knows it and it is likely enough; else w stops drafting.
void take_next(sf_engine *e, draft_work &w, int32_t row, int32_t *out, int32_t n_vocab_target, float p_min) {
    const float *logits = llama_get_logits_ith(e->ctx, row);
    int32_t best = 0;
    for (int32_t i = 1; i < e->n_vocab; i++) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    bool ok = best < n_vocab_target;
    if (ok && p_min > 0) {
        double sum = 0;
        for (int32_t i = 0; i < e->n_vocab; i++) {
            sum += std::exp((double)(logits[i] - logits[best]));
        }
        ok = 1.0 / sum >= (double)p_min;
    }
    if (!ok) {
        w.drafting = false;
        return;
    }
    out[w.req->out_off + w.req->out_len++] = best;
    // Nothing follows an end of generation.
    w.drafting = w.req->out_len < w.max && !llama_vocab_is_eog(e->vocab, best);
}

// Frees the sequences no request of this call took when the cells the
// call needs beside everything held would overflow the shared KV pool.
void make_room(sf_engine *e, const std::vector<draft_work> &work) {
    uint64_t need = 0;
    for (const draft_work &w : work) {
        if (w.seq >= 0) {
            need += w.req->hist_len - w.fed + w.max;
        }
    }
    for (const sf_draft_seq &d : e->draft_seqs) {
        need += d.held.size();
    }
    if (need <= (uint64_t)e->n_ctx) {
        return;
    }
    for (int32_t s = 0; s < (int32_t)e->draft_seqs.size(); s++) {
        sf_draft_seq &d = e->draft_seqs[(size_t)s];
        if (d.used && d.last_call != e->draft_calls) {
            llama_memory_seq_rm(e->mem, s, -1, -1);
            d = sf_draft_seq{};
        }
    }
}

// Feeds the history the sequences lack, at most one batch a call: the
// requests whose whole rest fits first, in order, then as much of the
// others as is left. A request fed to its end drafts its first token from
// its last row; one not yet caught up drafts nothing this call, so a long
// prompt reaches the draft model over several steps instead of stalling
// one step of every lane.
int catch_up(sf_engine *e, std::vector<draft_work> &work, const int32_t *tokens, int32_t *out,
             int32_t n_vocab_target, float p_min) {
    llama_batch &b = e->batch;
    b.n_tokens = 0;
    e->draft_row_req.clear();
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < work.size() && b.n_tokens < e->n_batch; k++) {
            draft_work &w = work[k];
            uint32_t rest = w.seq < 0 ? 0 : w.req->hist_len - w.fed;
            if (rest == 0 || (pass == 0 && rest > (uint32_t)(e->n_batch - b.n_tokens))) {
                continue;
            }
            const int32_t *h = tokens + w.req->hist_off;
            while (w.fed < w.req->hist_len && b.n_tokens < e->n_batch) {
                bool last = w.fed + 1 == w.req->hist_len;
                sf_batch_add(b, h[w.fed], (int32_t)w.fed, w.seq, last);
                e->draft_row_req.push_back(last ? (int32_t)k : -1);
                w.fed++;
            }
        }
    }
    if (b.n_tokens == 0) {
        return SF_OK;
    }
    if (int rc = decode(e)) {
        return rc;
    }
    for (int32_t i = 0; i < b.n_tokens; i++) {
        e->draft_seqs[(size_t)b.seq_id[i][0]].held.push_back(b.token[i]);
        if (int32_t k = e->draft_row_req[(size_t)i]; k >= 0) {
            work[(size_t)k].drafting = work[(size_t)k].max > 0;
            if (work[(size_t)k].drafting) {
                take_next(e, work[(size_t)k], i, out, n_vocab_target, p_min);
            }
        }
    }
    return SF_OK;
}

// One decode per draft position: each drafting lane's last draft token.
int extend(sf_engine *e, std::vector<draft_work> &work, int32_t *out, int32_t n_vocab_target, float p_min) {
    llama_batch &b = e->batch;
    for (;;) {
        b.n_tokens = 0;
        e->draft_row_req.clear();
        for (size_t k = 0; k < work.size(); k++) {
            draft_work &w = work[k];
            if (!w.drafting) {
                continue;
            }
            if (b.n_tokens == e->n_batch) {
                w.drafting = false;  // more sequences than a batch has rows
                continue;
            }
            const sf_draft_req &r = *w.req;
            sf_batch_add(b, out[r.out_off + r.out_len - 1], (int32_t)(r.hist_len + r.out_len - 1), w.seq, true);
            e->draft_row_req.push_back((int32_t)k);
        }
        if (b.n_tokens == 0) {
            return SF_OK;
        }
        if (int rc = decode(e)) {
            return rc;
        }
        for (int32_t i = 0; i < b.n_tokens; i++) {
            draft_work &w = work[(size_t)e->draft_row_req[(size_t)i]];
            e->draft_seqs[(size_t)w.seq].held.push_back(b.token[i]);
            take_next(e, w, i, out, n_vocab_target, p_min);
        }
    }
}

int draft(sf_engine *e, sf_draft_req *reqs, uint32_t n, const int32_t *tokens, uint32_t n_tokens, int32_t *out,
          uint32_t cap_out, int32_t n_vocab_target, float p_min) {
    e->err.clear();
    if ((n > 0 && reqs == nullptr) || (n_tokens > 0 && tokens == nullptr) || (cap_out > 0 && out == nullptr)) {
        return sf_fail(e, SF_ERR_INVALID, "draft: an array with a count but no data");
    }
    if (e->pooling != LLAMA_POOLING_TYPE_NONE || e->partial != SF_PARTIAL_NONE || e->n_live > 0) {
        return sf_fail(e, SF_ERR_UNSUPPORTED,
                       "draft: the engine must be a generation model without partial state or lanes of its own");
    }
    if (int rc = sf_draft_check_reqs(e, reqs, n, tokens, n_tokens, cap_out)) {
        return rc;
    }
    if (e->draft_seqs.empty()) {
        e->draft_seqs.resize((size_t)e->n_seq_max);
        e->draft_row_req.reserve((size_t)e->n_batch);
    }
    e->draft_calls++;
    std::vector<draft_work> work(n);
    for (uint32_t i = 0; i < n; i++) {
        sf_draft_req &r = reqs[i];
        r.out_len = 0;
        draft_work &w = work[i];
        w.req = &r;
        const int32_t *h = tokens + r.hist_off;
        bool known = std::all_of(h, h + r.hist_len, [&](int32_t t) { return t < e->n_vocab; });
        // The drafts sit at hist_len .. hist_len + max - 2 (the last one is
        // never fed), inside the context.
        if (!known || r.hist_len >= (uint32_t)e->n_ctx) {
            continue;
        }
        w.max = std::min<uint32_t>(r.max, (uint32_t)e->n_ctx - r.hist_len);
        w.seq = seq_for(e, r.lane);
        if (w.seq < 0) {
            continue;
        }
        // Keep the common prefix, less one token when it is the whole
        // history: the last token's logits are needed again.
        std::vector<llama_token> &held = e->draft_seqs[(size_t)w.seq].held;
        size_t c = std::mismatch(held.begin(), held.begin() + std::min(held.size(), (size_t)r.hist_len), h).first -
                   held.begin();
        c = std::min(c, (size_t)r.hist_len - 1);
        if (!llama_memory_seq_rm(e->mem, w.seq, (llama_pos)c, -1)) {
            llama_memory_seq_rm(e->mem, w.seq, -1, -1);
            c = 0;
        }
        held.resize(c);
        w.fed = (uint32_t)c;
    }
    make_room(e, work);
    int rc = catch_up(e, work, tokens, out, n_vocab_target, p_min);
    if (rc == SF_OK) {
        rc = extend(e, work, out, n_vocab_target, p_min);
    }
    if (rc != SF_OK) {
        // Start every sequence afresh: what a failed call left is unknown.
        llama_memory_clear(e->mem, true);
        for (sf_draft_seq &d : e->draft_seqs) {
            d = sf_draft_seq{};
        }
        for (uint32_t i = 0; i < n; i++) {
            reqs[i].out_len = 0;
        }
    }
    return rc;
}

const char *vocab_difference(const sf_engine *t, const sf_engine *d, char *buf, size_t cap) {
    const llama_vocab *vt = t->vocab, *vd = d->vocab;
    if (llama_vocab_type(vt) != llama_vocab_type(vd)) {
        snprintf(buf, cap, "vocabulary type %d, the model's is %d", (int)llama_vocab_type(vd), (int)llama_vocab_type(vt));
        return buf;
    }
    if (llama_vocab_get_add_bos(vt) != llama_vocab_get_add_bos(vd) ||
        (llama_vocab_get_add_bos(vt) && llama_vocab_bos(vt) != llama_vocab_bos(vd))) {
        snprintf(buf, cap, "BOS token %d (added: %d), the model's is %d (added: %d)", llama_vocab_bos(vd),
                 (int)llama_vocab_get_add_bos(vd), llama_vocab_bos(vt), (int)llama_vocab_get_add_bos(vt));
        return buf;
    }
    if (llama_vocab_get_add_eos(vt) != llama_vocab_get_add_eos(vd) ||
        (llama_vocab_get_add_eos(vt) && llama_vocab_eos(vt) != llama_vocab_eos(vd))) {
        snprintf(buf, cap, "EOS token %d (added: %d), the model's is %d (added: %d)", llama_vocab_eos(vd),
                 (int)llama_vocab_get_add_eos(vd), llama_vocab_eos(vt), (int)llama_vocab_get_add_eos(vt));
        return buf;
    }
    if (std::abs(t->n_vocab - d->n_vocab) > SF_DRAFT_VOCAB_SLACK) {
        snprintf(buf, cap, "%d tokens, the model has %d", d->n_vocab, t->n_vocab);
        return buf;
    }
    for (int32_t i = SF_DRAFT_TEXT_FROM; i < std::min(t->n_vocab, d->n_vocab); i++) {
        const char *a = llama_vocab_get_text(vt, i), *b = llama_vocab_get_text(vd, i);
        if (std::strcmp(a != nullptr ? a : "", b != nullptr ? b : "") != 0) {
            snprintf(buf, cap, "token %d is %.40s, the model's is %.40s", i, b != nullptr ? b : "", a != nullptr ? a : "");
            return buf;
        }
    }
    return nullptr;
}

}  // namespace

// Refuses a malformed draft call: shared by the draft sources.
int sf_draft_check_reqs(sf_engine *e, const sf_draft_req *reqs, uint32_t n, const int32_t *tokens, uint32_t n_tokens,
               uint32_t cap_out) {
    for (uint32_t i = 0; i < n; i++) {
        const sf_draft_req &r = reqs[i];
        if (r.hist_len == 0 || (uint64_t)r.hist_off + r.hist_len > n_tokens) {
            return sf_fail(e, SF_ERR_INVALID, "draft lane %u: history [%u, +%u) empty or outside the %u tokens", r.lane,
                           r.hist_off, r.hist_len, n_tokens);
        }
        if ((uint64_t)r.out_off + r.max > cap_out) {
            return sf_fail(e, SF_ERR_INVALID, "draft lane %u: output [%u, +%u) outside the %u slots", r.lane,
                           r.out_off, r.max, cap_out);
        }
        for (uint32_t j = 0; j < r.hist_len; j++) {
            if (tokens[r.hist_off + j] < 0) {
                return sf_fail(e, SF_ERR_INVALID, "draft lane %u: token %d", r.lane, tokens[r.hist_off + j]);
            }
        }
        for (uint32_t j = 0; j < i; j++) {
            if (reqs[j].lane == r.lane) {
                return sf_fail(e, SF_ERR_INVALID, "draft: lane %u twice", r.lane);
            }
        }
    }
    return SF_OK;
}

int sf_draft_compatible(const sf_engine *target, const sf_engine *draft, char *err, int32_t err_cap) {
    if (target == nullptr || draft == nullptr) {
        sf_set_err(err, err_cap, "draft vocabulary", "no engine");
        return SF_ERR_INVALID;
    }
    return sf_guard(
        [&] {
            char buf[160];
            if (const char *why = vocab_difference(target, draft, buf, sizeof buf)) {
                sf_set_err(err, err_cap, "draft vocabulary", why);
                return (int)SF_ERR_UNSUPPORTED;
            }
            return (int)SF_OK;
        },
        [&](const char *msg) {
            sf_set_err(err, err_cap, "draft vocabulary", msg);
            return (int)SF_ERR_EXCEPTION;
        });
}

int sf_draft(sf_engine *d, sf_draft_req *reqs, uint32_t n_reqs, const int32_t *tokens, uint32_t n_tokens,
             int32_t *out, uint32_t cap_out, int32_t n_vocab_target, float p_min) {
    if (d == nullptr) {
        return SF_ERR_INVALID;
    }
    return sf_guard([&] { return draft(d, reqs, n_reqs, tokens, n_tokens, out, cap_out, n_vocab_target, p_min); },
                    [&](const char *msg) {
                        llama_memory_clear(d->mem, true);
                        for (sf_draft_seq &s : d->draft_seqs) {
                            s = sf_draft_seq{};
                        }
                        for (uint32_t i = 0; i < n_reqs; i++) {
                            reqs[i].out_len = 0;
                        }
                        return sf_fail(d, SF_ERR_EXCEPTION, "draft: %s", msg);
                    });
}
