/*
 * superfluid.h — the engine ABI between the Go scheduler and llama.cpp.
 *
 * One call per scheduling step: sf_tick(engine, plan, events), which runs
 * exactly one llama_decode (none for a plan of retires and admits only). The plan and
 * the events are plain arrays of fixed-size records that the caller owns
 * (Go allocates and pins them), so a steady-state tick allocates nothing on
 * the caller's side and the engine copies only what it must keep (a lane's
 * prompt, at admission).
 *
 * Threading: an engine is owned by one thread at a time.
 *
 * Errors: every call returns an sf_status; a non-zero status comes with a
 * message readable through sf_last_error until the next call on the engine
 * (the text calls, which may run concurrently, write theirs into a caller's
 * buffer instead). No call aborts the process on bad input, and no C++
 * exception leaves a call: every entry point catches them and returns
 * SF_ERR_EXCEPTION (or its documented failure value).
 */
#ifndef SUPERFLUID_H
#define SUPERFLUID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sf_engine sf_engine;

/* Status codes. Keep in sync with engine/status.go. */
enum sf_status {
    SF_OK = 0,
    SF_ERR_INVALID = 1,      /* a malformed argument or plan entry */
    SF_ERR_UNKNOWN_LANE = 2, /* the lane is not admitted */
    SF_ERR_LANE_EXISTS = 3,  /* admitting a lane tag already in use */
    SF_ERR_SEQ_RANGE = 4,    /* sequence id outside [0, n_seq_max) */
    SF_ERR_SEQ_BUSY = 5,     /* the sequence already carries a lane */
    SF_ERR_PAST_PROMPT = 6,  /* a prefill outside the lane's prompt */
    SF_ERR_CONTEXT = 7,      /* a prompt longer than the context */
    SF_ERR_KV_FULL = 8,      /* the KV pool has no room for the batch */
    SF_ERR_BATCH = 9,        /* a step larger than the batch size */
    SF_ERR_STATE = 10,       /* a state blob that is not ours or not this model's */
    SF_ERR_BUFFER = 11,      /* a caller buffer too small; the needed size is reported */
    SF_ERR_MODEL = 12,       /* the model could not be loaded */
    SF_ERR_DECODE = 13,      /* llama_decode failed */
    SF_ERR_UNSUPPORTED = 14, /* the model cannot do this (e.g. partial truncation) */
    SF_ERR_TEMPLATE = 15,    /* the chat template could not be applied */
    SF_ERR_EXCEPTION = 16,   /* a C++ exception was caught at the ABI */
    SF_ERR_CLOSED = 17,      /* the engine is closed (reported by the binding) */
    SF_ERR_GRAMMAR = 18      /* a grammar that does not compile, an unknown grammar id, or a
                                reply the grammar does not allow */
};

/* Why a lane stopped generating. */
enum sf_finish {
    SF_FINISH_NONE = 0,
    SF_FINISH_EOG = 1,       /* the model produced an end-of-generation token */
    SF_FINISH_LENGTH = 2,    /* max_tokens reached */
    SF_FINISH_CONTEXT = 3,   /* the sequence filled the context */
    SF_FINISH_ERROR = 4,     /* the lane failed; its lane event's status says why */
    SF_FINISH_GRAMMAR = 5    /* the lane's grammar is complete: nothing more may follow */
};

/* KV cache cell types, as llama.cpp's --cache-type-k/-v name them. The
 * values are stable: exported state records them (seq.cpp). */
enum sf_kv_type {
    SF_KV_F16 = 0, SF_KV_Q8_0 = 1, SF_KV_Q4_0 = 2, SF_KV_F32 = 3, SF_KV_BF16 = 4,
    SF_KV_Q4_1 = 5, SF_KV_Q5_0 = 6, SF_KV_Q5_1 = 7, SF_KV_IQ4_NL = 8
};

typedef struct sf_open_params {
    const char *model_path;
    int32_t n_ctx;       /* 0: the model's training context */
    int32_t n_seq_max;   /* engine sequences (lanes plus cached prefixes) */
    int32_t n_batch;     /* most tokens one step may carry */
    int32_t n_ubatch;    /* physical micro-batch */
    int32_t n_threads;
    int32_t type_k;      /* enum sf_kv_type of the K cache */
    int32_t type_v;      /* enum sf_kv_type of the V cache; a quantized one needs flash attention */
    int32_t flash_attn;  /* -1 auto (on when type_v is quantized), 0 off, 1 on */
    int32_t use_mmap;
    int32_t max_lanes;   /* lanes that may be admitted at once */
    int32_t n_gpu_layers;/* layers offloaded to a GPU backend, if one is loaded */
    /* 1: weights go through the CPU backend's extra buffer types, which
     * repack Q4_0/Q4_K/IQ4_NL into interleaved rows when the build has
     * them (llama.cpp's default); 0: weights stay in the (mmap'd) file
     * layout (llama-server's --no-repack). */
    int32_t use_extra_bufts;
    /* How long the CPU threads poll for the next graph before sleeping,
     * 0 (sleep at once) to 100 (llama.cpp's --poll; 50 is its default).
     * Engines with the same threads and poll share one pool of threads.
     * -1: no pool; ggml starts threads for every graph. */
    int32_t poll;
    /* The caller's identity of the model file (a digest); exported state
     * carries it and import refuses state from any other model. */
    uint8_t model_id[32];
    /* LoRA adapters loaded with the model (lora.cpp), at most SF_MAX_LORA;
     * which apply, at what scale, each plan says. */
    const char *const *lora_paths;
    int32_t n_lora;
    /* 1: load the model's multi-token-prediction (NextN) layers and open a
     * context on them beside the engine's, which sf_mtp_draft drafts from
     * (--spec-type draft-mtp); refused on a model without such layers or
     * whose sequences cannot be cut back after a draft. */
    int32_t mtp;
    /* The longest draft a lane will carry (--spec-draft-n-max; 0: the
     * server does not speculate). On a recurrent or hybrid model whose
     * architecture llama.cpp can roll back, the context keeps that many
     * recurrent-state snapshots per sequence (n_rs_seq; the state's memory
     * grows by that factor plus one) so that a rejected draft can be cut
     * out; sf_desc.drafts says whether it did. */
    int32_t draft_max;
} sf_open_params;

#define SF_MAX_LORA 64
/* The largest |scale| a plan may give an adapter: llama-server takes any
 * float, but a scale past this makes the adapter's delta swamp the weights
 * (and ±inf or NaN poisons every logit). */
#define SF_MAX_LORA_SCALE 100.0f

/* Sampling parameters of one lane. A temperature below 1e-5 (NaN, 0 and
 * negatives included) means greedy. A sampled lane's draw at each token
 * depends only on (seed, the token's position in the sequence, logits), so
 * a lane re-admitted with its reply so far appended to the prompt continues
 * as it would have. Ranges (anything else is refused): top_k >= 0, top_p in
 * (0, 1], min_p in [0, 1], repeat_penalty finite and > 0, frequency and
 * presence penalties within ±1e6, penalty_last_n >= -1 (clamped to n_ctx). */
typedef struct sf_sampling {
    float temperature;
    int32_t top_k;          /* 0: off */
    float top_p;            /* 1: off */
    float min_p;            /* 0: off */
    float repeat_penalty;   /* 1: off */
    float frequency_penalty;
    float presence_penalty;
    int32_t penalty_last_n; /* tokens the penalties look back over; -1: whole context */
    uint64_t seed;
} sf_sampling;

/* A bias of -inf bans its token; a bias that bans every token of the
 * vocabulary is refused; others are clamped to ±1e6 (+inf included). */

typedef struct sf_logit_bias {
    int32_t token;
    float bias;
} sf_logit_bias;

/*
 * Admit a lane: bind a lane tag to an engine sequence with a prompt. The
 * first `cached` prompt tokens must already be in the sequence (a prefix the
 * cache seeded); prefills then cover [cached, prompt_len).
 */
typedef struct sf_admit {
    uint32_t lane;
    int32_t seq;
    uint32_t prompt_off;  /* into sf_plan.tokens */
    uint32_t prompt_len;
    uint32_t cached;
    uint32_t max_tokens;  /* 0: until EOG or the context is full */
    uint32_t bias_off;    /* into sf_plan.biases */
    uint32_t bias_len;
    int32_t n_logprobs;   /* 0: none; >0: the sampled token's and the top-N */
    uint32_t flags;       /* reserved, 0 */
    uint32_t grammar;     /* 0: none; else an id from sf_grammar_compile */
    /* The last grammar_replay prompt tokens are the lane's own reply so far
     * (a preempted lane resuming): the grammar walks them first, and an
     * admission whose reply the grammar would not have allowed is refused. */
    uint32_t grammar_replay;
    sf_sampling sampling;
} sf_admit;

/* Feed prompt[offset, offset+count) of a lane. */
typedef struct sf_prefill {
    uint32_t lane;
    uint32_t offset;
    uint32_t count;
} sf_prefill;

/* Feed a prefilled lane's last sampled token and sample its next.
 *
 * A draft (draft_len > 0, tokens at sf_plan.tokens[draft_off, +draft_len))
 * is what the lane's reply is guessed to continue with after that token:
 * the step carries it as draft_len more rows of the lane, each with its
 * logits, and samples the rows in order with the lane's own sampler (grammar,
 * bias, penalties, the positional draw) while each sampled token equals the
 * draft token fed after it. The lane commits the tokens sampled (the drafts
 * accepted and one of the model's own), so it gives exactly the tokens it
 * gives without a draft, several a step; the rejected rows leave the KV
 * cache (llama_memory_seq_rm). Refused (SF_ERR_INVALID) on a model whose
 * sf_desc.drafts is 0, or when the draft would pass the context.
 *
 * synth_accept > 0 (benchmarking only, llama-server's --spec-synth-*):
 * the first synth_accept draft tokens are committed as the lane's tokens
 * whatever the model makes of them, then the next row is sampled and ends
 * the lane's step; the output is not the model's. Refused on a lane with a
 * grammar (which could not take a token it refuses) and beyond draft_len. */
typedef struct sf_decode {
    uint32_t lane;
    uint32_t draft_off;
    uint32_t draft_len;
    uint32_t synth_accept;
} sf_decode;

typedef struct sf_plan {
    const uint32_t *retires;     uint32_t n_retires;
    const sf_admit *admits;      uint32_t n_admits;
    const sf_prefill *prefills;  uint32_t n_prefills;
    const sf_decode *decodes;    uint32_t n_decodes;
    const int32_t *tokens;       uint32_t n_tokens;
    const sf_logit_bias *biases; uint32_t n_biases;
    /* The step's LoRA scales, one per loaded adapter (0: not applied); none
     * (n_lora_scales 0): no adapter. llama.cpp applies adapters to the whole
     * context, so every lane of the step runs under this set. */
    const float *lora_scales;    uint32_t n_lora_scales;
} sf_plan;

/* One sampled token. */
typedef struct sf_token_event {
    uint32_t lane;
    int32_t token;
    float logprob;     /* of the sampled token, when logprobs were asked for */
    uint32_t top_off;  /* into sf_events.top */
    uint32_t top_len;
    uint32_t finish;   /* enum sf_finish: set on a lane's last token */
} sf_token_event;

typedef struct sf_top_logprob {
    int32_t token;
    float logprob;
} sf_top_logprob;

/* Where a lane stands after the tick; one record per lane the tick touched. */
typedef struct sf_lane_event {
    uint32_t lane;
    uint32_t finish;      /* enum sf_finish */
    uint32_t prefilled;   /* prompt tokens now in the sequence */
    uint32_t n_past;      /* tokens now in the sequence (prompt + fed replies) */
    uint32_t generated;   /* tokens sampled since admission */
    int32_t status;       /* enum sf_status of the lane's last step */
} sf_lane_event;

typedef struct sf_timings {
    int64_t step_ns;         /* wall time of the step's llama_decode; 0: none ran */
    uint32_t prefill_tokens;
    uint32_t decode_tokens;
    /* Tokens of grammar lanes: the unconstrained choice was allowed (one
     * token checked), or was refused and the whole vocabulary masked. */
    uint32_t grammar_fast;
    uint32_t grammar_masked;
    /* Draft rows the step verified, and how many of them were accepted. */
    uint32_t draft_tokens;
    uint32_t draft_accepted;
} sf_timings;

typedef struct sf_events {
    sf_token_event *tokens; uint32_t n_tokens; uint32_t cap_tokens;
    sf_top_logprob *top;    uint32_t n_top;    uint32_t cap_top;
    sf_lane_event *lanes;   uint32_t n_lanes;  uint32_t cap_lanes;
    sf_timings timings;
    /* Out: when a refused plan is refused because of one lane's entry,
     * has_fault_lane is 1 and fault_lane names it; a failure of the whole
     * step (e.g. llama_decode) blames no lane. */
    uint32_t fault_lane;
    int32_t has_fault_lane;
} sf_events;

/* The model descriptor. Strings are owned by the engine. */
typedef struct sf_desc {
    char arch[32];
    int32_t n_vocab;
    int32_t n_ctx;
    int32_t n_ctx_train;
    int32_t n_seq_max;
    int32_t n_batch;
    int32_t n_embd;
    int32_t n_layer;
    /* K and V cache bytes one context token takes, at the cache types the
     * context was created with (type_k, type_v: ggml's names; an
     * embedding engine may hold f16 whatever was asked): as allocated on
     * the upstream route (a sliding-window cache at its share of the
     * context's cells, recurrent layers none), every layer's on the Go
     * module's. recurrent_state_bytes: the recurrent layers' state of all
     * sequences, fixed whatever the context (0: none). mtp_bytes: the
     * multi-token prediction block's own KV cache, for an engine opened
     * with mtp (0: none). */
    int64_t kv_bytes_per_token;
    int64_t recurrent_state_bytes;
    int64_t mtp_bytes;
    char type_k[16];
    char type_v[16];
    int32_t bos, eos, eot;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep; /* -1: absent */
    int32_t add_bos;
    int32_t partial_truncation; /* 1: a sequence can be cut at any position */
    int32_t n_eog;
    const int32_t *eog;         /* every end-of-generation token */
    const char *chat_template;  /* "" when the model has none */
    uint64_t n_params;
    uint64_t model_bytes;
    /* What the model file recommends (general.sampling.*): SF_REC_* bits
     * say which keys it has with a usable value. */
    int32_t rec_has;
    int32_t rec_top_k;
    float rec_top_p;
    float rec_min_p;
    /* The longest token piece in bytes (special tokens spelled out): text
     * of more than n_ctx times this many bytes cannot fit the context. */
    int32_t max_piece_bytes;
    /* enum sf_pooling: not SF_POOLING_NONE for an embedding model, whose
     * engine runs sf_embed and refuses sf_tick. */
    int32_t pooling;
    int32_t n_embd_pooled; /* floats in one pooled vector (sf_embed's stride); a reranker's labels */
    /* enum sf_partial: what of the model's memory cannot be cut at any
     * position (partial_truncation is 1 only for SF_PARTIAL_NONE); which
     * cuts are valid for a sequence now, sf_seq_min_cut says. */
    int32_t partial;
    int32_t n_swa;         /* the sliding window in tokens; 0: none */
    /* The engine checkpoints a prefilling lane's partial state every
     * ckpt_every prompt tokens and at the prompt's end, keeping the last
     * ckpt_max per sequence (sf_seq_checkpoints); 0: it takes none. A
     * recurrent model's also ckpt_tail tokens before the end, where a
     * prefill step ends (0: none). */
    int32_t ckpt_every;
    int32_t ckpt_max;
    int32_t ckpt_tail;
    /* 1: decodes may carry drafts (sf_decode): a sequence can be cut back
     * after a rejected one. 0 on sliding-window models, whose window cache
     * may have dropped, for the draft's later positions, cells the
     * positions after a cut still see, and on recurrent and hybrid models
     * unless opened with draft_max on an architecture llama.cpp rolls back
     * (drafts_refused says which). */
    int32_t drafts;
    /* The longest draft a decode may carry on a recurrent or hybrid model
     * (the recurrent-state snapshots kept); 0: only the batch bounds it. */
    int32_t draft_max;
    /* Why drafts is 0 (static text), or null. */
    const char *drafts_refused;
    /* What a reranker's pairs are built from (llama-server's
     * format_prompt_rerank): the model's rerank template ("" when it has
     * none), else BOS, query, EOS, SEP, document, EOS as the vocabulary
     * adds them. */
    const char *rerank_template;
    int32_t sep; /* -1: none */
    int32_t add_eos, add_sep;
    int32_t n_lora; /* adapters loaded (sf_open_params.lora_paths) */
} sf_desc;

/* Memory a cut can lose: SWA, the cells of a sliding-window layer that
 * left the window (llama.cpp reuses them); RECURRENT, a recurrent layer's
 * state, which exists only at the sequence's end. */
enum sf_partial { SF_PARTIAL_NONE = 0, SF_PARTIAL_SWA = 1, SF_PARTIAL_RECURRENT = 2 };

/* How an embedding model pools its tokens' vectors into one (llama.cpp's
 * enum llama_pooling_type, as <arch>.pooling_type stores it). */
enum sf_pooling { SF_POOLING_NONE = 0, SF_POOLING_MEAN = 1, SF_POOLING_CLS = 2, SF_POOLING_LAST = 3, SF_POOLING_RANK = 4 };

enum sf_rec { SF_REC_TOP_K = 1, SF_REC_TOP_P = 2, SF_REC_MIN_P = 4 };

/* Engine lifetime. sf_open writes a message into err on failure. */
sf_engine *sf_open(const sf_open_params *params, char *err, size_t err_len);
void sf_close(sf_engine *e);
const char *sf_last_error(const sf_engine *e);
int sf_describe(const sf_engine *e, sf_desc *out);

int sf_tick(sf_engine *e, const sf_plan *plan, sf_events *events);

/* Text. tokenize/detokenize/token_piece return the length written, a
 * negative value whose magnitude is the size needed, or SF_TEXT_FAILED
 * with the reason in err (when err is not null). They only read the
 * vocabulary and may run concurrently with each other and with a tick. */
#define SF_TEXT_FAILED INT32_MIN
int32_t sf_tokenize(const sf_engine *e, const char *text, int32_t text_len,
                    int32_t *out, int32_t cap, int32_t add_special, int32_t parse_special,
                    char *err, int32_t err_cap);
int32_t sf_token_piece(const sf_engine *e, int32_t token, char *out, int32_t cap, int32_t special,
                       char *err, int32_t err_cap);
int32_t sf_detokenize(const sf_engine *e, const int32_t *tokens, int32_t n,
                      char *out, int32_t cap, int32_t special, char *err, int32_t err_cap);
/* Apply the model's chat template (or tmpl, when given) through llama.cpp's
 * built-in template matcher. *needed gets the rendered length; with cap too
 * small it returns SF_ERR_BUFFER. A failure's message goes into err. */
int sf_chat_apply(const sf_engine *e, const char *tmpl, const char *const *roles,
                  const char *const *contents, int32_t n_msg, int32_t add_assistant,
                  char *out, int32_t cap, int32_t *needed, char *err, int32_t err_cap);

/* Embeddings. One input of an sf_embed call: tokens[off, off+len). */
typedef struct sf_embed_input {
    uint32_t off;
    uint32_t len;
} sf_embed_input;

/* sf_embed runs n_inputs inputs of an embedding engine in one llama_decode,
 * input i in sequence i from position 0, and writes each input's pooled
 * vector (sf_desc.n_embd_pooled floats, not normalized) to out[i * n_embd_pooled]. Every
 * input must fit in the one micro-batch pooling needs, so the call refuses
 * (SF_ERR_BATCH) inputs whose tokens together exceed sf_desc.n_batch, more
 * inputs than sf_desc.n_seq_max (SF_ERR_SEQ_RANGE), an empty input or one
 * outside tokens, a token outside the vocabulary (SF_ERR_INVALID), and out_cap
 * (floats) too small (SF_ERR_BUFFER), all before llama.cpp sees anything;
 * a generation model's engine answers SF_ERR_UNSUPPORTED. The sequences
 * are empty again when it returns. */
int sf_embed(sf_engine *e, const int32_t *tokens, uint32_t n_tokens, const sf_embed_input *inputs,
             uint32_t n_inputs, float *out, size_t out_cap);

/* Drafts from a second model (speculative decoding, draft.cpp). An engine
 * opened on a small model with the target's vocabulary drafts for the
 * target's lanes; the target verifies the drafts (sf_decode). The draft
 * engine runs no ticks: its sequences are its own, one per lane it
 * drafts for, holding what it last saw of that lane.
 *
 * sf_draft_compatible: SF_OK when draft's vocabulary is target's, as
 * llama.cpp's speculative decoding checks it (type, BOS and EOS, sizes
 * within 128, the text of every token from 5 on); else SF_ERR_UNSUPPORTED
 * with the first difference in err. */
int sf_draft_compatible(const sf_engine *target, const sf_engine *draft, char *err, int32_t err_cap);

/* One lane's draft request: hist is the lane's tokens so far (prompt and
 * reply, ending with the token the target feeds next); up to max tokens
 * that follow it are drafted into out[out_off, +max), their count in
 * out_len. lane names the lane: its sequence keeps what it held, so the
 * next request feeds only what changed (rejected drafts are cut back). */
typedef struct sf_draft_req {
    uint32_t lane;
    uint32_t hist_off; /* into tokens */
    uint32_t hist_len;
    uint32_t max;
    uint32_t out_off;  /* into out */
    uint32_t out_len;  /* out */
} sf_draft_req;

/* sf_draft drafts greedily for n requests, batched: one llama_decode
 * feeds the lanes' new history, at most a batch of it (a lane not fed to
 * its end drafts nothing this call, and catches up over the next ones),
 * then one per draft position feeds the drafting lanes' last draft
 * tokens. A
 * lane stops drafting at max, at a token outside the target's vocabulary
 * (n_vocab_target) or at one whose probability is below p_min. Requests
 * beyond the engine's sequences, or whose history passes its context, get
 * no draft. Malformed requests are SF_ERR_INVALID; a failed decode
 * (SF_ERR_KV_FULL, SF_ERR_DECODE) empties every draft sequence and drafts
 * nothing. */
int sf_draft(sf_engine *d, sf_draft_req *reqs, uint32_t n_reqs, const int32_t *tokens, uint32_t n_tokens,
             int32_t *out, uint32_t cap_out, int32_t n_vocab_target, float p_min);

/* sf_mtp_draft drafts for e's own lanes from the model's
 * multi-token-prediction block (an engine opened with mtp): requests as
 * sf_draft's, lane naming one of e's lanes, whose history must be its
 * sequence plus its pending token (anything else drafts nothing). Each
 * step e runs keeps, for the block, the rows the sequences kept with the
 * trunk's hidden state before each; a call feeds a drafting lane's rows
 * beside its first draft row, then one llama_decode per draft position
 * for every drafting lane, greedily, stopping at max, an
 * end of generation or a token below p_min. SF_ERR_UNSUPPORTED on an
 * engine without the block; a failed decode drafts nothing. */
int sf_mtp_draft(sf_engine *e, sf_draft_req *reqs, uint32_t n_reqs, const int32_t *tokens, uint32_t n_tokens,
                 int32_t *out, uint32_t cap_out, float p_min);

/* sf_mtp_seq_state reports what the multi-token prediction block holds of
 * sequence seq: the last position whose trunk state it keeps (*fed, -1:
 * none) and the highest position in its cache (*cached, -1: none; the
 * rows since the lane last drafted wait outside it). SF_ERR_UNSUPPORTED
 * without the block, SF_ERR_INVALID for a sequence out of range. */
int sf_mtp_seq_state(sf_engine *e, int32_t seq, int32_t *fed, int32_t *cached);

/* Grammars (llama.cpp's GBNF). sf_grammar_compile parses a grammar once and
 * files it under a new id (never 0) that admissions name; it may run on any
 * thread, also while a tick runs. root null or "" is "root". A lazy grammar
 * constrains nothing until a trigger: one of trigger_tokens sampled (the
 * grammar starts with it), or a match of one of trigger_patterns
 * (ECMAScript regular expressions, searched for in the last 256 bytes of
 * the output after each token; the grammar starts at the first non-empty
 * capture group, or at the match). A grammar that does not compile, a bad
 * pattern or a trigger token outside the vocabulary is SF_ERR_GRAMMAR with
 * the reason in err. sf_grammar_free drops an id (lanes using it keep their
 * copy); SF_ERR_GRAMMAR if it is unknown. */
int sf_grammar_compile(sf_engine *e, const char *gbnf, const char *root, int32_t lazy,
                       const char *const *trigger_patterns, int32_t n_patterns, const int32_t *trigger_tokens,
                       int32_t n_tokens, uint32_t *id, char *err, int32_t err_cap);
int sf_grammar_free(sf_engine *e, uint32_t id);

/* Test only: make the engine's next tick (SF_INJECT_TICK, in validation,
 * after an admission is staged), next tokenize (SF_INJECT_TOKENIZE) or next
 * embed (SF_INJECT_EMBED, after its decode) throw, to exercise the
 * exception guards. */
enum sf_inject { SF_INJECT_NONE = 0, SF_INJECT_TICK = 1, SF_INJECT_TOKENIZE = 2, SF_INJECT_EMBED = 3 };
void sf_inject_exception(sf_engine *e, int32_t where);

/* Sequence primitives for the prefix cache. A sequence with a lane on it
 * cannot be the target of a copy, truncation, free or import. */
int sf_seq_copy(sf_engine *e, int32_t src, int32_t dst, int32_t n_tokens);
int sf_seq_truncate(sf_engine *e, int32_t seq, int32_t n_keep);
int sf_seq_free(sf_engine *e, int32_t seq);
int32_t sf_seq_length(const sf_engine *e, int32_t seq);
/* Export writes a self-describing blob (header + llama state); *needed gets
 * its size. With cap too small it returns SF_ERR_BUFFER and writes nothing. */
int sf_seq_export(sf_engine *e, int32_t seq, uint8_t *out, size_t cap, size_t *needed);
int sf_seq_import(sf_engine *e, int32_t seq, const uint8_t *data, size_t len, int32_t *n_tokens);
/* A tail blob holds the state of a sequence's tokens from position from
 * on, for a sequence that holds exactly the stream's first from tokens to
 * take back (a full-attention model's only: SF_ERR_INVALID elsewhere).
 * Export as sf_seq_export; import appends the tail to seq and leaves seq's
 * first from tokens as they were if it fails. */
int sf_seq_export_tail(sf_engine *e, int32_t seq, int32_t from, uint8_t *out, size_t cap, size_t *needed);
int sf_seq_import_tail(sf_engine *e, int32_t seq, const uint8_t *data, size_t len, int32_t *n_tokens);

/* The shortest length seq can be cut (sf_seq_truncate) or copied
 * (sf_seq_copy) to with its state whole: any length from it up to the
 * sequence's own is valid, a shorter one is not. 0 for a model without
 * partial state; for a sliding window, pos_min + n_swa once the cells
 * before pos_min are gone (llama-server's test) — more than the length
 * when even the end's window is incomplete, so the sequence cannot be
 * continued at all; for recurrent state, the sequence's length. -1 for a
 * bad sequence. */
int32_t sf_seq_min_cut(const sf_engine *e, int32_t seq);

/* Checkpoints: the partial state (llama.cpp's PARTIAL_ONLY export: the
 * sliding-window cells or the recurrent state) of a sequence at a prompt
 * position, taken by sf_tick as lanes prefill (sf_desc.ckpt_every). A
 * checkpoint is a self-describing blob like sf_seq_export's. The list
 * belongs to the sequence: emptied by sf_seq_free, sf_seq_import and as
 * the target of sf_seq_copy, cut by sf_seq_truncate.
 * sf_seq_checkpoints writes up to cap positions (ascending) and sets *n to
 * how many there are; sf_seq_checkpoint_get copies checkpoint i as
 * sf_seq_export does (SF_ERR_BUFFER with *needed when cap is short);
 * sf_seq_checkpoints_clear drops them (the cache has taken them). */
int sf_seq_checkpoints(sf_engine *e, int32_t seq, int32_t *pos, int32_t cap, int32_t *n);
int sf_seq_checkpoint_get(sf_engine *e, int32_t seq, int32_t i, uint8_t *out, size_t cap, size_t *needed);
int sf_seq_checkpoints_clear(sf_engine *e, int32_t seq);
/* Resumes seq at a checkpoint: seq must hold at least the checkpoint's
 * n_keep tokens with their full-attention cells (a copy or import of the
 * stream it was taken from); its partial state is replaced by the
 * checkpoint's and everything from n_keep on is cut. On failure seq is
 * emptied. */
int sf_seq_restore_checkpoint(sf_engine *e, int32_t seq, int32_t n_keep, const uint8_t *data, size_t len);

/* sf_rollbacks_settled counts the rolled-back recurrent states (a rejected
 * draft's cut, which llama.cpp applies at the sequence's next decode) that
 * a copy settled into the source's current state first. */
uint64_t sf_rollbacks_settled(const sf_engine *e);

/* The CPU features ggml's CPU backend was built with, "NAME=VALUE;…". */
int32_t sf_cpu_features(char *out, int32_t cap);

/* Bytes of the open model's weights that sit in buffers of the named
 * type: "CPU_REPACK" is the CPU backend's repacked copy (0 when the build
 * does not repack, sf_open_params.use_extra_bufts was 0, or no weight has
 * a repackable type). */
int64_t sf_weight_bytes_in(const sf_engine *e, const char *buffer_type);

/* The llama.cpp compiled in: its commit, and where its source came from. */
const char *sf_llama_commit(void);
const char *sf_llama_source(void);

/* Which build of ggml's CPU backend runs, and how it was chosen, e.g.
 * "v4 (of v4 v3 v2; cpuid)" or "single build". */
int32_t sf_cpu_variant(char *out, int32_t cap);

/* Load ggml backend plugins (e.g. libggml-cuda.so) from a directory; returns
 * the number of devices now registered. The CPU backend is built in. */
int32_t sf_load_backends(const char *dir);

/* Install the log sink (llama.cpp and ggml). */
typedef void (*sf_log_fn)(int32_t level, const char *text);
void sf_set_log(sf_log_fn fn);

/* A plain C decode loop, the baseline the tick is measured against: n_lanes
 * sequences starting at the given sequence ids each hold a prompt of
 * prompt_len tokens, then n_rounds batches of one token per lane are decoded
 * and sampled greedily. Returns the nanoseconds spent in the decode rounds,
 * or a negative status. */
int64_t sf_bench_plain_decode(sf_engine *e, int32_t n_lanes, int32_t prompt_len, int32_t n_rounds);

/* Benchmark only: decode a prompt of prompt_len tokens (<= the engine's
 * batch) into sequence 0 with one llama_decode call. Returns nanoseconds, or
 * a negative status. */
int64_t sf_bench_plain_prefill(sf_engine *e, int32_t prompt_len);

/* sf_prefill_rows prefills embedding rows (n_rows × width floats, width the
 * model's input embedding width: an image chunk's encoded rows) into an
 * admitted lane's prompt at its next unprefilled positions, in one
 * llama_decode of its own (a llama_batch carries tokens or rows, not both);
 * the lane's prompt holds placeholder tokens there, which no tick decodes.
 * The span must end before the prompt's last position (the lane samples its
 * first token from a token row). The rows run under the LoRA adapter set
 * the last sf_tick applied (its plan's lora_scales, applied even by a tick
 * with no token rows): call it after the tick of a step of the lane's set. */
int sf_prefill_rows(sf_engine *e, uint32_t lane, const float *rows, uint32_t n_rows, uint32_t width);

/* Media (images and audio) through llama.cpp's mtmd: a projector (mmproj
 * GGUF) loaded beside an engine's model turns images and audio into
 * embedding rows of the model's width. These calls are separate from sf_tick: a prompt with media is
 * tokenized into chunks (text tokens, image chunks), and each image chunk is
 * encoded into rows the caller then prefills as prompt rows. Like the text
 * calls, the open/tokenize calls write errors into a caller's buffer.
 * Threading: sf_media_tokenize may run concurrently; sf_media_encode uses
 * the projector's one compute context and is owned by one thread at a time.
 * An engine built without mtmd (ENGINE=module) returns SF_ERR_UNSUPPORTED. */
typedef struct sf_media sf_media;
typedef struct sf_media_prompt sf_media_prompt;

enum sf_media_chunk_kind { SF_MEDIA_TEXT = 0, SF_MEDIA_IMAGE = 1, SF_MEDIA_AUDIO = 2 };

/* One chunk of a tokenized prompt. */
typedef struct sf_media_chunk {
    int32_t kind;      /* enum sf_media_chunk_kind */
    uint32_t n_tokens; /* text tokens, or embedding rows of a media chunk */
    int32_t n_pos;     /* positions the chunk takes in the sequence */
    char id[72];       /* a media chunk's id: the SHA-256 (hex) of its file's bytes */
    uint32_t segment;  /* which of its file's chunks this is (audio: its 30-second window) */
} sf_media_chunk;

/* What a projector encodes (sf_media_modalities' bits). */
enum sf_media_modality { SF_MEDIA_VISION = 1, SF_MEDIA_HEARING = 2 };

/* The fewest decoded samples an audio file may have (mtmd's preprocessing
 * asserts on fewer). */
#define SF_MEDIA_MIN_SAMPLES 400

/* sf_media_open loads the projector at path for the engine's model (its
 * output width must be the model's). The engine must outlive it. A
 * projector that needs M-RoPE positions or non-causal attention over its
 * rows is refused (SF_ERR_UNSUPPORTED): the scheduler feeds media rows at
 * sequential positions under the causal mask, as text. */
int sf_media_open(sf_engine *e, const char *path, int32_t n_threads, sf_media **out, char *err, int32_t err_cap);
void sf_media_close(sf_media *m);
/* Rows' width in floats (the model's input embedding width). */
int32_t sf_media_n_embd(const sf_media *m);
/* The marker that stands for one image or audio in sf_media_tokenize's text. */
const char *sf_media_marker(const sf_media *m);
/* The encoders the projector has: SF_MEDIA_VISION | SF_MEDIA_HEARING. */
int32_t sf_media_modalities(const sf_media *m);
/* The sample rate audio is decoded at for the audio encoder (0: none). */
int32_t sf_media_audio_rate(const sf_media *m);
/* The rows of one 30-second audio window (0: no audio encoder): an audio
 * file is at least floor(seconds / 30) + 1 windows once mtmd pads it. */
int32_t sf_media_audio_window_rows(const sf_media *m);
/* Why the projector's audio encoder is not used, or "" (it is used, or
 * there is none): mtmd would abort encoding its windows (media_window.cpp).
 * sf_media_modalities then leaves out SF_MEDIA_HEARING and audio is refused
 * as for a projector without one, saying this. Lives as long as m. */
const char *sf_media_audio_refused(const sf_media *m);
/* For tests: the rows mtmd counts (counted) and its encoder graph builds
 * (built) for a window of n_frames mel frames of projector type proj
 * (clip.cpp's name) stacking stack frames, Whisper's kernels; -1 where the
 * count or the graph itself would assert. Returns 1, or 0 when proj is not
 * a type the guard mirrors. */
int sf_media_audio_window_rows_for(const char *proj, int32_t stack, int32_t n_frames, int32_t *counted,
                                   int32_t *built);
/* sf_media_tokenize decodes n_images media files (images: JPEG, PNG, BMP,
 * GIF; audio: WAV, MP3, FLAC, told apart by their magic bytes; files[i] of
 * lens[i] bytes), and tokenizes text, in which the i-th marker stands for
 * the i-th file, into chunks (an audio file is one chunk per 30-second
 * window). add_special: the model's BOS where it has one. SF_ERR_INVALID: a
 * file that does not decode, audio shorter than SF_MEDIA_MIN_SAMPLES, or
 * markers that do not match the files in number; SF_ERR_UNSUPPORTED: a kind
 * of media the projector has no encoder for. */
int sf_media_tokenize(sf_media *m, const char *text, const uint8_t *const *files, const size_t *lens,
                      uint32_t n_images, int32_t add_special, sf_media_prompt **out, char *err, int32_t err_cap);
uint32_t sf_media_prompt_n_chunks(const sf_media_prompt *p);
/* Chunk i's description; for a text chunk, its tokens are copied into
 * tokens (cap entries; SF_ERR_BUFFER when fewer than n_tokens). */
int sf_media_prompt_chunk(const sf_media_prompt *p, uint32_t i, sf_media_chunk *out, int32_t *tokens, uint32_t cap);
/* sf_media_encode runs the projector on media chunk i and writes its
 * n_tokens × sf_media_n_embd floats into out (cap floats). */
int sf_media_encode(sf_media *m, const sf_media_prompt *p, uint32_t i, float *out, size_t cap, char *err,
                    int32_t err_cap);
void sf_media_prompt_free(sf_media_prompt *p);

#ifdef __cplusplus
}
#endif

#endif
