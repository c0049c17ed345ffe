// internal.h — the engine's private state, shared by the native sources.
#ifndef SUPERFLUID_INTERNAL_H
#define SUPERFLUID_INTERNAL_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "llama.h"
#include "superfluid.h"

// SF_LLAMA_UPSTREAM is set by the build (Makefile, LLAMA_CPP_DIR=...) when
// compiling against an upstream llama.cpp tree rather than the copy the Go
// module github.com/ollama/ollama vendors. llama.h has no API version macro,
// so the build says which of the two API levels this is.
#ifndef SF_LLAMA_UPSTREAM
#define SF_LLAMA_UPSTREAM 0
#endif

// The most top-N logprobs a lane may ask for per token (OpenAI caps at 20).
constexpr int32_t SF_MAX_LOGPROBS = 20;

// Below this temperature the logits divided by it overflow to ±inf, so a
// lower one is greedy (engine.MinTemperature mirrors it).
constexpr float SF_MIN_TEMPERATURE = 1e-5f;

// Logit biases are clamped to ±SF_MAX_BIAS (+inf included; -inf stays a
// ban): beyond it a bias already decides the token against any model's
// logits, and keeping it finite keeps the sampler free of inf - inf.
constexpr float SF_MAX_BIAS = 1e6f;

// Frequency and presence penalties beyond ±SF_MAX_PENALTY are refused:
// count * penalty must stay finite or a banned (-inf) logit turns NaN.
constexpr float SF_MAX_PENALTY = 1e6f;

// Model logits are clamped into ±SF_MAX_LOGIT before the sampler chain (NaN
// becomes -inf), so a broken model's inf cannot meet a -inf ban.
constexpr float SF_MAX_LOGIT = 1e30f;

// Checkpoints of partial state (seq.cpp): one every SF_CKPT_EVERY prompt
// tokens and one at the prompt's end, the last SF_CKPT_MAX kept per
// sequence. Measured (cgo BenchmarkCheckpoint, synthetic f16 models): a
// checkpoint is the state of 410 (gemma4 small, 1.05 MB; 0.5b, 3.2 MB) to
// 590-850 (qwen35 small, 0.86 MB; 0.5b, 4.5 MB) tokens of the stream
// itself, and restores in 1-32 ms, where re-prefilling 512 tokens takes
// ~0.17 s (small) to ~2.6 s (0.5b) on this machine's two cores unloaded.
// A divergence loses what lies between it and the checkpoint before it:
// on issue 22's gemma4 edit (4,532 tokens, diverging at 3,928, the stream
// evicted to host memory, which keeps only the last window), every 1,024
// reused 68%, every 512 80% (llama-server 87%). So 512: checkpoints then
// add about the stream's own bytes again (the host tier counts them in
// its budget, and kv keeps at most about two per 512 tokens), for at most
// 512 tokens (256 on average) of prefill lost. 16 cover the last 8k
// tokens of a prompt; its end always has one (a next turn that re-renders
// the reply resumes there).
constexpr int32_t SF_CKPT_EVERY = 512;
constexpr int32_t SF_CKPT_MAX = 16;
// A recurrent model also checkpoints SF_CKPT_TAIL tokens before a prompt's
// end (the planner ends a step there): the same prompt again — a
// regenerated reply, a retried request, a batch of one prompt — must
// re-run at least its last token, and recurrent state cannot be cut back,
// so without it such a prompt resumes from the last multiple of 512
// (nothing, under 512 tokens). llama-server checkpoints 4 tokens before
// the end for the same reason. A sliding-window model cuts within its
// window and needs none.
constexpr int32_t SF_CKPT_TAIL = 4;

// engine.cpp: a log line to the callback sf_set_log installed (media.cpp
// routes mtmd's log through it).
void sf_log_forward(enum ggml_log_level level, const char *text);

// build_info.cpp: the refusal of a model whose architecture the compiled
// llama.cpp does not know, or null.
const char *sf_unknown_arch(const char *path, char *msg, size_t msg_len);

struct llama_grammar;
struct sf_grammar_compiled;  // grammar.cpp

// A lane's grammar: its own copy of the compiled grammar's stacks, advanced
// by every token it samples. Movable, not copyable: it owns g.
struct sf_grammar_state {
    llama_grammar *g = nullptr;  // null: the lane has no grammar
    std::shared_ptr<const sf_grammar_compiled> compiled;
    bool awaiting = false;  // a lazy grammar before its trigger
    std::string window;     // the output's last bytes, searched for a trigger

    sf_grammar_state() = default;
    sf_grammar_state(const sf_grammar_state &) = delete;
    sf_grammar_state &operator=(const sf_grammar_state &) = delete;
    sf_grammar_state(sf_grammar_state &&o) noexcept { *this = std::move(o); }
    sf_grammar_state &operator=(sf_grammar_state &&o) noexcept {
        if (this != &o) {
            reset();
            g = o.g;
            o.g = nullptr;
            compiled = std::move(o.compiled);
            awaiting = o.awaiting;
            window = std::move(o.window);
        }
        return *this;
    }
    ~sf_grammar_state() { reset(); }
    void reset() noexcept;
};

struct sf_lane {
    bool used = false;  // the slot holds an admitted lane
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
    bool greedy = true;
    uint64_t seed = 0;
    // Bias, penalties and the truncation samplers; never a final sampler
    // (dist or greedy): the draw is ours, keyed by position.
    llama_sampler *chain = nullptr;
    sf_grammar_state grammar;

    uint64_t touched_tick = 0;  // the last tick that reported this lane
    // This step's draft (sf_decode): tokens fed after pending, in the
    // plan's token array; valid during the tick only.
    const int32_t *draft = nullptr;
    uint32_t draft_len = 0;
    uint32_t synth_accept = 0;  // draft tokens committed unverified (benchmarks)
};

// A CPU threadpool several engines share (compute.cpp): one graph computes
// on it at a time, under mu.
struct sf_pool {
    std::mutex mu;
    ggml_threadpool *tp = nullptr;
    int32_t threads = 0;
    int32_t poll = 0;
};

// The process's pool for this many threads polling at this level (0-100,
// llama.cpp's --poll), made on first use; null where the CPU backend offers
// none (ggml then starts threads per graph).
sf_pool *sf_pool_get(int32_t threads, int32_t poll);

// A checkpoint of a sequence's partial state at pos tokens (seq.cpp).
struct sf_ckpt {
    int32_t pos = 0;
    std::vector<uint8_t> blob;  // header + llama.cpp's PARTIAL_ONLY state
};

// seq.cpp: checkpoints a lane's sequence after a prefill step, when the
// policy (sf_desc.ckpt_every, the prompt's end) says so.
void sf_ckpt_after_prefill(sf_engine *e, const sf_lane *l, bool completes);

// A draft engine's record of one of its sequences (draft.cpp): the
// tokens its cells hold, and the lane they were drafted for.
struct sf_draft_seq {
    bool used = false;
    uint32_t lane = 0;
    uint64_t last_call = 0;  // the sf_draft call that last used it (LRU)
    std::vector<llama_token> held;
};

struct sf_mtp;

struct sf_engine {
    llama_model *model = nullptr;
    llama_context *ctx = nullptr;
    const llama_vocab *vocab = nullptr;
    llama_memory_t mem = nullptr;

    int32_t n_ctx = 0;
    int32_t n_seq_max = 0;
    // The llama.cpp sequence past n_seq_max that tail export and import
    // pass through (seq.cpp); -1 where the context has none.
    int32_t scratch_seq = -1;
    int32_t n_batch = 0;
    int32_t max_lanes = 0;
    int32_t n_vocab = 0;
    // The K and V cache types pair's code that exported state carries
    // (sf_kv_state_code), and the types the context holds.
    int32_t kv_type = SF_KV_F16;
    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
    int32_t max_piece_bytes = 0;  // the longest token piece, special tokens spelled out
    // The GGUF's <arch>.pooling_type (enum llama_pooling_type); not NONE
    // makes an embedding engine: the context pools, sf_embed runs, sf_tick
    // refuses.
    int32_t pooling = LLAMA_POOLING_TYPE_NONE;
    int32_t n_embd = 0;  // floats in one pooled vector
    uint8_t model_id[32] = {};
    int32_t partial = SF_PARTIAL_NONE;  // enum sf_partial
    int32_t n_swa = 0;
    std::vector<std::vector<sf_ckpt>> ckpts;  // per sequence, ascending pos

    // Lane slots (max_lanes of them, never reallocated, so lane pointers
    // stay valid): admitting moves a lane staged by validation into a free
    // slot, which cannot fail or allocate.
    std::vector<sf_lane> slots;
    int32_t n_live = 0;
    std::vector<sf_lane> staged;     // the plan's admissions, built by validation
    std::vector<int64_t> seq_lane;  // sequence -> lane tag, or -1

    llama_batch batch = {};
    sf_pool *pool = nullptr;  // the threads llama_decode computes on; see sf_compute_lock
    std::vector<sf_lane *> row_lane;  // batch row -> lane sampling there, or null

    std::vector<int32_t> eog;
    std::string chat_template;
    std::string rerank_template;  // tokenizer.chat_template.rerank, "" when absent
    std::vector<llama_adapter_lora *> loras;  // freed with the model
    std::vector<float> lora_scales;           // the set the context runs under
    std::string arch;
    int64_t kv_bytes_per_token = 0;
    int64_t recurrent_state_bytes = 0;
    // The multi-token prediction block's KV cache (0: not opened).
    int64_t mtp_bytes = 0;
    // Recurrent-state rollback (rollback.cpp): the draft bound the open
    // params gave, the snapshots asked of llama.cpp, the snapshots it
    // keeps (llama_n_rs_seq: 0 on architectures without rollback), and
    // the pending rollbacks settled before a copy.
    int32_t rs_wanted = 0;
    int32_t rs_asked = 0;
    int32_t n_rs_seq = 0;
    uint64_t rs_settled = 0;
    int32_t rec_has = 0;  // SF_REC_* bits
    int32_t rec_top_k = 0;
    float rec_top_p = 0;
    float rec_min_p = 0;

    uint64_t tick_no = 0;
    std::string err;
    bool has_fault = false;  // the failed call blames one lane
    uint32_t fault_lane = 0;
    int32_t inject = 0;      // SF_INJECT_*: a test's request to throw

    // Compiled grammars by id. sf_grammar_compile and sf_grammar_free run
    // on any thread, beside a tick that looks admissions' grammars up.
    std::mutex grammar_mu;
    std::unordered_map<uint32_t, std::shared_ptr<const sf_grammar_compiled>> grammars;
    uint32_t next_grammar = 0;

    // As a draft engine (draft.cpp): its sequences' records, one per
    // sequence, and the calls made; the row -> request map of a draft batch.
    std::vector<sf_draft_seq> draft_seqs;
    uint64_t draft_calls = 0;
    std::vector<int32_t> draft_row_req;

    // The multi-token-prediction context (mtp.cpp); null unless the
    // engine was opened with mtp.
    sf_mtp *mtp = nullptr;

    // Scratch reused across ticks so a steady-state tick does not allocate.
    std::vector<sf_lane *> touched;
    std::vector<std::pair<float, int32_t>> top_scratch;
    std::vector<llama_token_data> cand;  // n_vocab candidates of one row
    std::vector<llama_logit_bias> bias_scratch;
    std::vector<uint8_t> banned_scratch;
};

// Holds the engine's pool for one llama_decode, so that engines sharing
// it compute one at a time.
class sf_compute_lock {
  public:
    explicit sf_compute_lock(sf_engine *e) {
        if (e->pool != nullptr) {
            lock_ = std::unique_lock<std::mutex>(e->pool->mu);
        }
    }

  private:
    std::unique_lock<std::mutex> lock_;
};

// embed.cpp: the pooling type a model file names (<arch>.pooling_type),
// LLAMA_POOLING_TYPE_NONE when it names none, or -1 for a value this engine
// does not pool by (rank, or anything unknown).
int32_t sf_model_pooling(const llama_model *m, const char *arch);

// LoRA (lora.cpp): load the open params' adapters (null, or the reason it
// failed), check a plan's scales, and set them on the context before its
// decode.
const char *sf_lora_load(sf_engine *e, const sf_open_params *p, char *msg, size_t msg_len);
int sf_lora_check(sf_engine *e, const sf_plan *p);
void sf_lora_apply(sf_engine *e, const sf_plan *p);

// Draft sources: the check every source's call makes of its requests
// (draft.cpp); the model's own multi-token-prediction block (mtp.cpp):
// open its context beside the engine's (null, or the reason it failed),
// follow each step into it, free it.
int sf_draft_check_reqs(sf_engine *e, const sf_draft_req *reqs, uint32_t n, const int32_t *tokens, uint32_t n_tokens,
                        uint32_t cap_out);
const char *sf_mtp_open(sf_engine *e, const llama_context_params &target, char *msg, size_t msg_len);
void sf_mtp_follow(sf_engine *e);
void sf_mtp_free(sf_engine *e);

// Recurrent-state rollback for drafts (rollback.cpp): the snapshots to ask
// of the context for the open params' draft bound (0: none); what the
// context kept, after it is created; why the engine refuses drafts (null:
// it takes them); whether a sequence has a rollback its next decode would
// apply; settling one into the current state (before a copy; op names the
// caller in the error); whether a cut of a recurrent sequence to n_keep
// must be refused because only a verification may roll back.
uint32_t sf_rollback_depth_to_ask(const llama_model *model, const sf_open_params *p, uint32_t n_ubatch,
                                  int32_t pooling);
void sf_rollback_opened(sf_engine *e, const sf_open_params *p, uint32_t asked);
const char *sf_drafts_refused(const sf_engine *e);
bool sf_rollback_pending(sf_engine *e, int32_t seq);
int sf_rollback_settle(sf_engine *e, int32_t seq, const char *op);
bool sf_rollback_cut_refused(const sf_engine *e, int32_t seq, int32_t n_keep);

// Records a formatted error message on the engine and returns code.
int sf_fail(sf_engine *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// The same, blaming one lane of the plan.
int sf_fail_lane(sf_engine *e, uint32_t lane, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

// Checks an admission's sampling and bias and builds its sampler chain into
// l (staged, not yet in a slot). Returns a status; on failure l holds no
// chain.
int sf_lane_build_sampling(sf_engine *e, sf_lane *l, const sf_admit *a, const sf_logit_bias *bias);
// Samples the token at position l->n_past from a row's logits, counting
// grammar-checked tokens in t; -1 when the lane's grammar admits no token.
llama_token sf_lane_sample(sf_engine *e, sf_lane *l, const float *logits, sf_timings *t);
// Frees what a lane owns outside its slot.
void sf_lane_release(sf_lane *l);

// Gives a staged lane the admission's grammar (a clone of the compiled
// one) and replays the reply the prompt ends with. Returns a status.
int sf_lane_build_grammar(sf_engine *e, sf_lane *l, const sf_admit *a);
// Whether the grammar allows tok next (a one-candidate apply).
bool sf_grammar_allows(sf_grammar_state *s, llama_token tok);
// Sets the logit of every candidate the grammar refuses to -inf.
void sf_grammar_mask(sf_grammar_state *s, llama_token_data_array *c);
// Advances the grammar over tok, which it allows; reports whether the
// grammar is complete (nothing more can follow). May throw.
bool sf_grammar_accept(sf_engine *e, sf_grammar_state *s, llama_token tok);
// Drops every compiled grammar (the engine is closing).
void sf_grammar_table_clear(sf_engine *e);

int64_t sf_now_ns();

// Catches what a call into llama.cpp may throw, so no exception crosses
// the C ABI (it would terminate the process). on_error gets the message
// and returns the call's failure value.
template <class Body, class OnError>
auto sf_guard(Body &&body, OnError &&on_error) noexcept -> decltype(body()) {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return on_error("out of memory");
    } catch (const std::exception &x) {
        return on_error(x.what());
    } catch (...) {
        return on_error("unknown C++ exception");
    }
}

// Appends one row of one sequence to b, as llama.cpp's common_batch_add;
// the caller checks b has room (every batch here is sized to its work).
inline void sf_batch_add(llama_batch &b, llama_token tok, llama_pos pos, llama_seq_id seq, bool logits) {
    int32_t i = b.n_tokens++;
    b.token[i] = tok;
    b.pos[i] = pos;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = seq;
    b.logits[i] = logits ? 1 : 0;
}

// The lane in use with this tag, nullptr when none is (tick.cpp, mtp.cpp).
inline sf_lane *sf_find_lane(sf_engine *e, uint32_t tag) {
    for (sf_lane &l : e->slots) {
        if (l.used && l.tag == tag) {
            return &l;
        }
    }
    return nullptr;
}

// Writes msg into a caller's error buffer, when there is one.
inline void sf_set_err(char *err, int32_t err_cap, const char *op, const char *msg) {
    if (err != nullptr && err_cap > 0) {
        snprintf(err, (size_t)err_cap, "%s: %s", op, msg);
    }
}

#if SF_LLAMA_UPSTREAM
// Whether mtmd can encode an audio projector's 30-second windows
// (media_window.cpp): checked says the projector's type is one whose
// window rows mtmd counts and builds by different formulas; counted and
// built are those rows; refusal, when not empty, says why its audio must
// not reach mtmd (the encode would GGML_ABORT).
struct sf_audio_window {
    bool checked = false;
    int64_t counted = 0;
    int64_t built = 0;
    std::string refusal;
};
// Reads the projector file's metadata (no weights) at path.
sf_audio_window sf_audio_window_check(const char *path);
// The two formulas for projector type proj (clip.cpp's name), its stack
// factor, a window of n_frames mel frames and the encoder's conv kernel
// widths and learned positions; false when proj is not such a type.
bool sf_audio_window_rows(const char *proj, int64_t stack, int64_t n_frames, int64_t kernel1, int64_t kernel2,
                          int64_t positions, int64_t *counted, int64_t *built);
#endif

#endif
