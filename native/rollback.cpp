// rollback.cpp — drafts on recurrent and hybrid models: llama.cpp's
// recurrent-state rollback (n_rs_seq) and the guards our memory operations
// need beside it.
//
// With n_rs_seq = N, every decode leaves, beside a sequence's state, the
// states of its last N positions of that decode (snapshot planes), and
// seq_rm(seq, p, -1) removing 1..N trailing positions only marks the
// sequence as "read plane k at the next decode" (a pending rollback). Two
// things follow that llama.cpp leaves to its caller:
//  - the planes hold the last decode's positions only: a cut further back
//    than that decode's rows is accepted all the same, and reads stale
//    planes. Only the verification cut (tick.cpp), within the rows the
//    lane just fed, may roll back; every other cut of a recurrent sequence
//    is refused as before.
//  - a pending rollback belongs to the sequence id, not to its state: a
//    copy (seq_cp) shares the cell without it, so the copy resumes from
//    the state with the rejected drafts in it, and the next decode of a
//    shared cell settles whichever id comes first. Copies settle the
//    source first (state out and back in, which llama.cpp writes from the
//    pending plane and reads into the current one).
#include <vector>

#include "internal.h"
#if SF_LLAMA_UPSTREAM
#include "../src/llama-memory-hybrid-iswa.h"
#include "../src/llama-memory-hybrid.h"
#include "../src/llama-memory-recurrent.h"
#endif

#if SF_LLAMA_UPSTREAM
static llama_memory_recurrent *sf_recurrent_memory(llama_memory_i *mem) {
    if (auto *h = dynamic_cast<llama_memory_hybrid *>(mem)) {
        return h->get_mem_recr();
    }
    if (auto *hi = dynamic_cast<llama_memory_hybrid_iswa *>(mem)) {
        return hi->get_mem_recr();
    }
    return dynamic_cast<llama_memory_recurrent *>(mem);
}
#endif

uint32_t sf_rollback_depth_to_ask(const llama_model *model, const sf_open_params *p, uint32_t n_ubatch,
                                  int32_t pooling) {
    if (p->draft_max <= 0 || pooling != LLAMA_POOLING_TYPE_NONE) {
        return 0;
    }
    if (!llama_model_is_recurrent(model) && !llama_model_is_hybrid(model)) {
        return 0;
    }
    // llama.cpp keeps a sequence's last 1 + n_rs_seq tokens in one
    // micro-batch and asserts that a micro-batch is longer than that.
    if ((uint64_t)p->draft_max + 1 >= n_ubatch) {
        return 0;
    }
    return (uint32_t)p->draft_max;
}

void sf_rollback_opened(sf_engine *e, const sf_open_params *p, uint32_t asked) {
    e->rs_asked = asked > 0 ? (int32_t)asked : 0;
    e->rs_wanted = p->draft_max > 0 ? p->draft_max : 0;
#if SF_LLAMA_UPSTREAM
    // The context clamps n_rs_seq to 0 for architectures without rollback.
    e->n_rs_seq = asked > 0 ? (int32_t)llama_n_rs_seq(e->ctx) : 0;
#else
    e->n_rs_seq = 0;
#endif
}

const char *sf_drafts_refused(const sf_engine *e) {
    // Before the recurrent case: a hybrid may have sliding-window
    // attention layers too (a hybrid-iswa memory), whose cells a rollback
    // cannot bring back.
    if (e->partial == SF_PARTIAL_SWA || llama_model_n_swa(e->model) > 0) {
        return "a sliding-window cache may have dropped cells that positions after a draft's cut still see";
    }
    if (e->partial == SF_PARTIAL_NONE) {
        return nullptr;
    }
    if (e->n_rs_seq > 0) {
        return nullptr;
    }
#if !SF_LLAMA_UPSTREAM
    return "this llama.cpp keeps no rollback snapshots of recurrent state";
#else
    if (e->rs_wanted == 0) {
        return "the engine was opened without a draft bound, so its recurrent state keeps no rollback snapshots";
    }
    if (e->rs_asked == 0) {
        return "a micro-batch must be longer than a lane's fed token and its longest draft "
               "(raise --ubatch or lower --spec-draft-n-max)";
    }
    return "llama.cpp keeps no rollback snapshots of this architecture's recurrent state";
#endif
}

bool sf_rollback_pending(sf_engine *e, int32_t seq) {
#if SF_LLAMA_UPSTREAM
    if (e->n_rs_seq == 0) {
        return false;
    }
    llama_memory_recurrent *r = sf_recurrent_memory(e->mem);
    return r != nullptr && seq >= 0 && (size_t)seq < r->rs_idx.size() && r->rs_idx[(size_t)seq] != 0;
#else
    (void)e;
    (void)seq;
    return false;
#endif
}

int sf_rollback_settle(sf_engine *e, int32_t seq, const char *op) {
    if (!sf_rollback_pending(e, seq)) {
        return SF_OK;
    }
    // The recurrent part only: llama.cpp writes a sequence's state from its
    // pending plane, and reading it back puts it in the current plane and
    // clears the pending index; the attention cells stay where they are.
    const llama_state_seq_flags flags = LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY;
    size_t size = llama_state_seq_get_size_ext(e->ctx, seq, flags);
    std::vector<uint8_t> state(size);
    size_t wrote = size > 0 ? llama_state_seq_get_data_ext(e->ctx, state.data(), size, seq, flags) : 0;
    if (wrote == 0 || wrote > size) {
        return sf_fail(e, SF_ERR_STATE, "%s: cannot read sequence %d's rolled-back recurrent state", op, seq);
    }
    if (llama_state_seq_set_data_ext(e->ctx, state.data(), wrote, seq, flags) == 0) {
        // Half-written state is worse than none: the prefix is recomputed.
        llama_memory_seq_rm(e->mem, seq, -1, -1);
        e->ckpts[(size_t)seq].clear();
        return sf_fail(e, SF_ERR_STATE, "%s: cannot settle sequence %d's rolled-back recurrent state", op, seq);
    }
    e->rs_settled++;
    return SF_OK;
}

bool sf_rollback_cut_refused(const sf_engine *e, int32_t seq, int32_t n_keep) {
    if (e->partial != SF_PARTIAL_RECURRENT || e->n_rs_seq == 0 || n_keep <= 0) {
        return false;
    }
    // llama.cpp would accept a cut of 1..n_rs_seq positions whatever the
    // last decode held; below the end only the verification cut knows the
    // planes are that decode's.
    return n_keep < llama_memory_seq_pos_max(e->mem, seq) + 1;
}

uint64_t sf_rollbacks_settled(const sf_engine *e) {
    return e != nullptr ? e->rs_settled : 0;
}
