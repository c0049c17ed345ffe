// mtp.cpp — drafts from the model's own multi-token-prediction block.
//
// Models such as GLM-4.5 carry, after their trunk, a NextN block trained to
// predict the token after next: its input at position p is the trunk's
// last hidden state at p - 1 beside the embedding of the token at p. It
// runs in a second llama.cpp context on the same model (llama.cpp's MTP
// context type) whose KV cache holds only the block's layer, one sequence
// per engine sequence.
//
// Every step the engine runs, the trunk also outputs its hidden state for
// every row (llama.cpp's unmasked NextN embeddings); after the rows are
// sampled and the rejected drafts cut, sf_mtp_follow keeps, per sequence,
// the rows it kept, each with the hidden state of the row before, and the
// last row's state, which waits for the lane's next token. A draft feeds
// the block a lane's kept rows (so a lane whose gate keeps it from
// drafting costs the block nothing), beside (that state, the pending
// token), then continues from the block's own output state, one decode
// per draft position for all drafting lanes; its draft rows are cut after.
//
// Drafts only ever cost rows: the engine verifies them as it verifies any
// draft. So where the block's record is unsure — a sequence restored from
// a cached prefix, reused by another lane — it starts that sequence over
// rather than reconstruct it; its drafts are then worse, never wrong.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "internal.h"

#if SF_LLAMA_UPSTREAM
#include "../src/llama-memory.h"

// llama.cpp's staging API (src/llama-ext.h, not among its installed
// headers, C++ linkage): the NextN hidden states.
void llama_set_embeddings_nextn(struct llama_context *ctx, bool value, bool masked);
float *llama_get_embeddings_nextn_ith(struct llama_context *ctx, int32_t i);
#endif

// What the block knows of one engine sequence: the last position whose
// trunk state it holds, and that state (the input the next position pairs
// its token with); and the rows the sequence kept since the block was last
// fed — fed only when the lane drafts, so a lane whose gate is closed
// costs the block no decode.
struct sf_mtp_seq {
    int32_t pos = -1;
    std::vector<float> h;
    std::vector<llama_token> pend_tok;  // at positions pend_pos0, pend_pos0 + 1, ...
    int32_t pend_pos0 = 0;
    std::vector<float> pend_h;  // each row's input state
};

// The most kept rows a sequence holds for the block: beyond, the oldest
// are dropped (the block then attends over fewer positions: its drafts
// are worse, never wrong). A lane that drafted not for this many steps
// has its gate closed; this bounds what waiting for it costs.
constexpr size_t SF_MTP_MAX_PENDING = 256;

struct sf_mtp {
    llama_context *ctx = nullptr;
    llama_memory_t mem = nullptr;
    llama_batch batch = {};  // tokens and hidden states, both
    int32_t n_embd = 0;
    std::vector<sf_mtp_seq> seqs;
    std::vector<float> zeros;        // the state of a position with none known
    std::vector<int32_t> row_req;    // draft batch row -> request
    std::vector<int32_t> last_seen;  // follow: sequence -> its last row in the step, or -1
};

void sf_mtp_free(sf_engine *e) {
    if (e->mtp == nullptr) {
        return;
    }
    if (e->mtp->batch.token != nullptr) {
        llama_batch_free(e->mtp->batch);
    }
    llama_free(e->mtp->ctx);
    delete e->mtp;
    e->mtp = nullptr;
}

#if SF_LLAMA_UPSTREAM

namespace {

void add_row(sf_mtp *m, llama_token tok, int32_t pos, int32_t seq, bool logits, const float *h) {
    llama_batch &b = m->batch;
    std::memcpy(b.embd + (size_t)b.n_tokens * (size_t)m->n_embd, h, sizeof(float) * (size_t)m->n_embd);
    sf_batch_add(b, tok, pos, seq, logits);
}

// Forgets everything the block holds: after a failed decode its cache is
// unknown.
void reset(sf_mtp *m) {
    llama_memory_clear(m->mem, true);
    for (sf_mtp_seq &q : m->seqs) {
        q.pos = -1;
        q.pend_tok.clear();
        q.pend_h.clear();
    }
}

int decode(sf_engine *e) {
    sf_compute_lock compute(e);
    return llama_decode(e->mtp->ctx, e->mtp->batch);
}

// Decodes a full batch of kept rows (no outputs) and empties it.
int flush(sf_engine *e) {
    int32_t n = e->mtp->batch.n_tokens;
    if (int d = decode(e); d != 0) {
        return sf_fail(e, d == 1 ? SF_ERR_KV_FULL : SF_ERR_DECODE,
                       "draft: the multi-token prediction block's llama_decode of %d kept rows: %d", n, d);
    }
    e->mtp->batch.n_tokens = 0;
    return SF_OK;
}

}  // namespace

const char *sf_mtp_open(sf_engine *e, const llama_context_params &target, char *msg, size_t msg_len) {
    if (llama_model_n_layer_nextn(e->model) < 1) {
        return "the model has no multi-token prediction (NextN) layers";
    }
    // A hybrid trunk drafts through its recurrent-state rollback
    // (rollback.cpp); the block itself keeps a plain KV cache.
    if (sf_drafts_refused(e) != nullptr || e->pooling != LLAMA_POOLING_TYPE_NONE) {
        return "the model's sequences cannot be cut back after a draft (sliding-window, embedding, or recurrent "
               "without rollback snapshots): its multi-token prediction layers cannot draft here";
    }
    llama_context_params cp = target;
    cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    cp.n_rs_seq = 0;
    auto *m = new sf_mtp();
    e->mtp = m;
    m->ctx = llama_init_from_model(e->model, cp);
    if (m->ctx == nullptr) {
        snprintf(msg, msg_len, "cannot open the multi-token prediction context (see debug log for llama.cpp's reason)");
        return msg;
    }
    if (e->pool != nullptr) {
        llama_attach_threadpool(m->ctx, e->pool->tp, e->pool->tp);
    }
    m->mem = llama_get_memory(m->ctx);
    // The block's own KV cache (its layer, every sequence, the whole
    // context) is memory the model holds beside the engine's.
    for (const auto &kv : m->mem->memory_breakdown()) {
        e->mtp_bytes += (int64_t)kv.second;
    }
    m->n_embd = llama_model_n_embd_out(e->model);
    int32_t n_batch = (int32_t)llama_n_batch(e->ctx);
    m->batch = llama_batch_init(n_batch, m->n_embd, 1);
    // llama_batch_init allocates tokens or states; the block reads both
    // (llama_batch_free frees both).
    m->batch.token = (llama_token *)malloc(sizeof(llama_token) * (size_t)n_batch);
    m->seqs.resize((size_t)llama_n_seq_max(e->ctx));
    m->last_seen.assign(m->seqs.size(), -1);
    m->zeros.assign((size_t)m->n_embd, 0.0f);
    // The trunk's state for every row it decodes (the block's input at the
    // next position), the block's for its output rows (its next draft's).
    llama_set_embeddings_nextn(e->ctx, true, false);
    llama_set_embeddings_nextn(m->ctx, true, true);
    return nullptr;
}

// Starts sequence s over in the block: nothing of it cached or waiting.
static void start_over(sf_mtp *m, int32_t s) {
    sf_mtp_seq &q = m->seqs[(size_t)s];
    llama_memory_seq_rm(m->mem, s, -1, -1);
    q.pos = -1;
    q.pend_tok.clear();
    q.pend_h.clear();
}

void sf_mtp_follow(sf_engine *e) {
    sf_mtp *m = e->mtp;
    if (m == nullptr || e->batch.n_tokens == 0) {
        return;
    }
    const llama_batch &src = e->batch;
    const size_t row = (size_t)m->n_embd;
    // A sequence the engine cut back or emptied (a retired lane, a cached
    // prefix reused in part) gives its cells back: the block's cache holds
    // no more than the engine's, so it fills no sooner.
    for (size_t s = 0; s < m->seqs.size(); s++) {
        if (m->seqs[s].pos >= 0 && llama_memory_seq_pos_max(e->mem, (llama_seq_id)s) < m->seqs[s].pos) {
            start_over(m, (int32_t)s);
        }
    }
    std::fill(m->last_seen.begin(), m->last_seen.end(), -1);
    for (int32_t i = 0; i < src.n_tokens; i++) {
        int32_t s = src.seq_id[i][0], p = src.pos[i];
        // A row past the sequence's end was a rejected draft.
        if (p > llama_memory_seq_pos_max(e->mem, s)) {
            continue;
        }
        sf_mtp_seq &q = m->seqs[(size_t)s];
        const float *h;
        int32_t prev = m->last_seen[(size_t)s];
        if (prev >= 0 && src.pos[prev] == p - 1) {
            h = llama_get_embeddings_nextn_ith(e->ctx, prev);
        } else if (prev < 0 && q.pos == p - 1 && !q.h.empty()) {
            h = q.h.data();
        } else {
            // Not where the block left the sequence: start it over here.
            start_over(m, s);
            h = m->zeros.data();
        }
        if (h == nullptr) {
            reset(m);
            return;
        }
        if (q.pend_tok.size() == SF_MTP_MAX_PENDING) {
            q.pend_tok.erase(q.pend_tok.begin());
            q.pend_h.erase(q.pend_h.begin(), q.pend_h.begin() + (ptrdiff_t)row);
            q.pend_pos0++;
        }
        if (q.pend_tok.empty()) {
            q.pend_pos0 = p;
        }
        q.pend_tok.push_back(src.token[i]);
        q.pend_h.insert(q.pend_h.end(), h, h + row);
        m->last_seen[(size_t)s] = i;
    }
    for (size_t s = 0; s < m->seqs.size(); s++) {
        if (int32_t i = m->last_seen[s]; i >= 0) {
            const float *h = llama_get_embeddings_nextn_ith(e->ctx, i);
            if (h == nullptr) {
                reset(m);
                return;
            }
            m->seqs[s].pos = src.pos[i];
            m->seqs[s].h.assign(h, h + row);
        }
    }
}

namespace {

// One request's progress through a draft call.
struct mtp_work {
    sf_draft_req *req;
    sf_lane *lane = nullptr;
    uint32_t max = 0;
    bool drafting = false;
};

// Takes the block's most likely token at row as w's next draft token, when
// likely enough; a draft ends at max and after an end of generation.
void take_next(sf_engine *e, mtp_work &w, int32_t row, int32_t *out, float p_min) {
    const float *logits = llama_get_logits_ith(e->mtp->ctx, row);
    if (logits == nullptr) {
        w.drafting = false;
        return;
    }
    int32_t best = 0;
    for (int32_t i = 1; i < e->n_vocab; i++) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    if (p_min > 0) {
        double sum = 0;
        for (int32_t i = 0; i < e->n_vocab; i++) {
            sum += std::exp((double)(logits[i] - logits[best]));
        }
        if (1.0 / sum < (double)p_min) {
            w.drafting = false;
            return;
        }
    }
    out[w.req->out_off + w.req->out_len++] = best;
    w.drafting = w.req->out_len < w.max && !llama_vocab_is_eog(e->vocab, best);
}

int mtp_draft(sf_engine *e, sf_draft_req *reqs, uint32_t n, const int32_t *tokens, uint32_t n_tokens, int32_t *out,
              uint32_t cap_out, float p_min) {
    e->err.clear();
    sf_mtp *m = e->mtp;
    if (m == nullptr) {
        return sf_fail(e, SF_ERR_UNSUPPORTED, "draft: the engine was not opened on the model's multi-token prediction layers");
    }
    if ((n > 0 && reqs == nullptr) || (n_tokens > 0 && tokens == nullptr) || (cap_out > 0 && out == nullptr)) {
        return sf_fail(e, SF_ERR_INVALID, "draft: an array with a count but no data");
    }
    if (int rc = sf_draft_check_reqs(e, reqs, n, tokens, n_tokens, cap_out)) {
        return rc;
    }
    std::vector<mtp_work> work(n);
    m->batch.n_tokens = 0;
    m->row_req.clear();
    for (uint32_t k = 0; k < n; k++) {
        sf_draft_req &r = reqs[k];
        r.out_len = 0;
        mtp_work &w = work[k];
        w.req = &r;
        sf_lane *l = sf_find_lane(e, r.lane);
        // The block drafts from where the lane is: its sequence as the
        // block last saw it, and its pending token.
        if (l == nullptr || l->pending < 0 || r.hist_len != l->n_past + 1 ||
            tokens[r.hist_off + r.hist_len - 1] != l->pending || l->n_past == 0 ||
            (uint64_t)l->n_past + r.max >= (uint64_t)e->n_ctx) {
            continue;
        }
        sf_mtp_seq &q = m->seqs[(size_t)l->seq];
        if (q.pos != (int32_t)l->n_past - 1 || q.h.empty() || r.max == 0) {
            continue;
        }
        w.lane = l;
        w.max = r.max;
        w.drafting = true;
    }
    // The rows the drafting lanes kept since the block was last fed, in
    // as many decodes as they need, the last beside the first draft rows.
    int rc = SF_OK;
    for (uint32_t k = 0; k < n && rc == SF_OK; k++) {
        if (!work[k].drafting) {
            continue;
        }
        int32_t seq = work[k].lane->seq;
        sf_mtp_seq &q = m->seqs[(size_t)seq];
        llama_memory_seq_rm(m->mem, seq, q.pend_tok.empty() ? q.pos + 1 : q.pend_pos0, -1);  // a draft's rows
        for (size_t j = 0; j < q.pend_tok.size() && rc == SF_OK; j++) {
            if (m->batch.n_tokens == e->n_batch && (rc = flush(e)) != SF_OK) {
                break;
            }
            add_row(m, q.pend_tok[j], q.pend_pos0 + (int32_t)j, seq, false, q.pend_h.data() + j * (size_t)m->n_embd);
        }
        q.pend_tok.clear();
        q.pend_h.clear();
    }
    m->row_req.clear();
    for (uint32_t k = 0; k < n && rc == SF_OK; k++) {
        mtp_work &w = work[k];
        if (!w.drafting) {
            continue;
        }
        if (m->batch.n_tokens == e->n_batch && (rc = flush(e)) != SF_OK) {
            break;
        }
        add_row(m, w.lane->pending, (int32_t)w.lane->n_past, w.lane->seq, true, m->seqs[(size_t)w.lane->seq].h.data());
        m->row_req.push_back((int32_t)k);
    }
    while (rc == SF_OK && m->batch.n_tokens > 0) {
        if (int d = decode(e); d != 0) {
            rc = sf_fail(e, d == 1 ? SF_ERR_KV_FULL : SF_ERR_DECODE, "draft: the multi-token prediction block's llama_decode of %d rows: %d",
                         m->batch.n_tokens, d);
            break;
        }
        // The block's output states become the next rows' inputs; copy
        // them out before the batch is rebuilt over its own buffers. The
        // drafting rows are the batch's last (kept rows come first).
        int32_t rows = (int32_t)m->row_req.size();
        int32_t first = m->batch.n_tokens - rows;
        std::vector<int32_t> reqs_of(m->row_req.begin(), m->row_req.end());
        std::vector<float> hs((size_t)rows * (size_t)m->n_embd);
        bool ok = true;
        for (int32_t i = 0; i < rows; i++) {
            const float *h = llama_get_embeddings_nextn_ith(m->ctx, first + i);
            if (h == nullptr) {
                ok = false;
                break;
            }
            std::memcpy(hs.data() + (size_t)i * (size_t)m->n_embd, h, sizeof(float) * (size_t)m->n_embd);
        }
        if (!ok) {
            rc = sf_fail(e, SF_ERR_DECODE, "draft: the multi-token prediction block gave no hidden state");
            break;
        }
        for (int32_t i = 0; i < rows; i++) {
            take_next(e, work[(size_t)reqs_of[(size_t)i]], first + i, out, p_min);
        }
        m->batch.n_tokens = 0;
        m->row_req.clear();
        for (int32_t i = 0; i < rows; i++) {
            mtp_work &w = work[(size_t)reqs_of[(size_t)i]];
            if (!w.drafting) {
                continue;
            }
            const sf_draft_req &r = *w.req;
            add_row(m, out[r.out_off + r.out_len - 1], (int32_t)(w.lane->n_past + r.out_len), w.lane->seq, true,
                    hs.data() + (size_t)i * (size_t)m->n_embd);
            m->row_req.push_back(reqs_of[(size_t)i]);
        }
    }
    // The drafts' rows leave the block's cache: the next step writes the
    // positions the lane really holds.
    for (const mtp_work &w : work) {
        if (w.lane != nullptr) {
            llama_memory_seq_rm(m->mem, w.lane->seq, (llama_pos)w.lane->n_past, -1);
        }
    }
    if (rc != SF_OK) {
        reset(m);
        for (uint32_t k = 0; k < n; k++) {
            reqs[k].out_len = 0;
        }
    }
    return rc;
}

}  // namespace

int sf_mtp_draft(sf_engine *e, sf_draft_req *reqs, uint32_t n_reqs, const int32_t *tokens, uint32_t n_tokens,
                 int32_t *out, uint32_t cap_out, float p_min) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    return sf_guard([&] { return mtp_draft(e, reqs, n_reqs, tokens, n_tokens, out, cap_out, p_min); },
                    [&](const char *msg) {
                        if (e->mtp != nullptr) {
                            reset(e->mtp);
                        }
                        for (uint32_t i = 0; i < n_reqs; i++) {
                            reqs[i].out_len = 0;
                        }
                        return sf_fail(e, SF_ERR_EXCEPTION, "draft: %s", msg);
                    });
}

int sf_mtp_seq_state(sf_engine *e, int32_t seq, int32_t *fed, int32_t *cached) {
    if (e == nullptr || fed == nullptr || cached == nullptr) {
        return SF_ERR_INVALID;
    }
    if (e->mtp == nullptr) {
        return SF_ERR_UNSUPPORTED;
    }
    if (seq < 0 || (size_t)seq >= e->mtp->seqs.size()) {
        return SF_ERR_INVALID;
    }
    *fed = e->mtp->seqs[(size_t)seq].pos;
    *cached = llama_memory_seq_pos_max(e->mtp->mem, seq);
    return SF_OK;
}

#else  // the Go module's llama.cpp has no multi-token prediction

const char *sf_mtp_open(sf_engine *, const llama_context_params &, char *, size_t) {
    return "this build's llama.cpp runs no multi-token prediction layers (build against a current one, LLAMA_CPP_DIR)";
}

void sf_mtp_follow(sf_engine *) {}

int sf_mtp_seq_state(sf_engine *e, int32_t, int32_t *, int32_t *) {
    return e == nullptr ? SF_ERR_INVALID : SF_ERR_UNSUPPORTED;
}

int sf_mtp_draft(sf_engine *e, sf_draft_req *, uint32_t, const int32_t *, uint32_t, int32_t *, uint32_t, float) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    return sf_fail(e, SF_ERR_UNSUPPORTED, "draft: this build's llama.cpp runs no multi-token prediction layers");
}

#endif
