// engine.cpp — opening and describing a model, text, logging.
//
// Every sf_* entry point runs its body inside sf_guard: llama.cpp throws
// (std::bad_alloc, a tokenizer's std::out_of_range or runtime_error), and
// an exception crossing the C ABI into Go would terminate the process.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "ggml-backend.h"
#include "ggml.h"
#include "internal.h"
#if SF_LLAMA_UPSTREAM
#include "../src/llama-kv-cache-iswa.h"
#include "../src/llama-memory-hybrid-iswa.h"
#include "../src/llama-memory-hybrid.h"
#include "../src/llama-memory-recurrent.h"
#endif

namespace {

// The engine's error string has room reserved for this, so recording an
// error never allocates (and cannot throw inside an exception handler).
constexpr size_t SF_ERR_MAX = 512;

void sf_vfail(sf_engine *e, const char *fmt, va_list ap) {
    char buf[SF_ERR_MAX];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (e != nullptr) {
        e->err.assign(buf);
    }
}

}  // namespace

int sf_fail(sf_engine *e, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sf_vfail(e, fmt, ap);
    va_end(ap);
    return code;
}

int sf_fail_lane(sf_engine *e, uint32_t lane, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sf_vfail(e, fmt, ap);
    va_end(ap);
    if (e != nullptr) {
        e->has_fault = true;
        e->fault_lane = lane;
    }
    return code;
}

int64_t sf_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static sf_log_fn g_log_fn = nullptr;

static void sf_log_bridge(enum ggml_log_level level, const char *text, void *) {
    if (g_log_fn != nullptr && text != nullptr) {
        g_log_fn((int32_t)level, text);
    }
}

void sf_log_forward(enum ggml_log_level level, const char *text) { sf_log_bridge(level, text, nullptr); }

void sf_set_log(sf_log_fn fn) {
    g_log_fn = fn;
    llama_log_set(sf_log_bridge, nullptr);
    ggml_log_set(sf_log_bridge, nullptr);
}

static int32_t sf_cpu_features_impl(char *out, int32_t cap) {
    out[0] = '\0';
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
    if (reg == nullptr) {
        return 0;
    }
    auto get = (ggml_backend_get_features_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
    if (get == nullptr) {
        return 0;
    }
    std::string s;
    for (ggml_backend_feature *f = get(reg); f != nullptr && f->name != nullptr; f++) {
        if (!s.empty()) {
            s += ';';
        }
        s += f->name;
        s += '=';
        s += f->value != nullptr ? f->value : "";
    }
    int32_t n = (int32_t)std::min<size_t>(s.size(), (size_t)cap - 1);
    memcpy(out, s.data(), (size_t)n);
    out[n] = '\0';
    return n;
}

int32_t sf_cpu_features(char *out, int32_t cap) {
    if (out == nullptr || cap <= 0) {
        return -1;
    }
    out[0] = '\0';
    return sf_guard([&] { return sf_cpu_features_impl(out, cap); }, [](const char *) { return (int32_t)0; });
}

int32_t sf_load_backends(const char *dir) {
    return sf_guard(
        [&] {
            if (dir != nullptr && dir[0] != '\0') {
                ggml_backend_load_all_from_path(dir);
            }
            return (int32_t)ggml_backend_dev_count();
        },
        [](const char *) { return (int32_t)0; });
}

// The ggml type of an enum sf_kv_type value; GGML_TYPE_COUNT for none.
static ggml_type sf_ggml_kv_type(int32_t t) {
    switch (t) {
    case SF_KV_F16: return GGML_TYPE_F16;
    case SF_KV_Q8_0: return GGML_TYPE_Q8_0;
    case SF_KV_Q4_0: return GGML_TYPE_Q4_0;
    case SF_KV_F32: return GGML_TYPE_F32;
    case SF_KV_BF16: return GGML_TYPE_BF16;
    case SF_KV_Q4_1: return GGML_TYPE_Q4_1;
    case SF_KV_Q5_0: return GGML_TYPE_Q5_0;
    case SF_KV_Q5_1: return GGML_TYPE_Q5_1;
    case SF_KV_IQ4_NL: return GGML_TYPE_IQ4_NL;
    default: return GGML_TYPE_COUNT;
    }
}

// The code exported state records for a K and V type pair: the type alone
// when both caches share it (what states held before the two could
// differ, so earlier park files of one type stay readable), else both.
static int32_t sf_kv_state_code(int32_t type_k, int32_t type_v) {
    return type_k == type_v ? type_k : type_k | (type_v + 1) << 8;
}

// Reads one general.sampling.* value; false when the key is absent or its
// value does not parse whole.
static bool sf_meta_number(const llama_model *m, const char *key, double *out) {
    char buf[64] = {};
    if (llama_model_meta_val_str(m, key, buf, sizeof buf) <= 0) {
        return false;
    }
    char *end = nullptr;
    double v = strtod(buf, &end);
    if (end == buf || *end != '\0' || !(v == v)) {
        return false;
    }
    *out = v;
    return true;
}

// What the model file recommends for sampling, where it says so with a
// value a request could carry itself (anything else is ignored: a file
// recommending nonsense must not poison every request).
static void sf_read_recommended(sf_engine *e) {
    double v = 0;
    if (sf_meta_number(e->model, "general.sampling.top_k", &v) && v >= 0 && v <= 1e9 && v == (double)(int64_t)v) {
        e->rec_has |= SF_REC_TOP_K;
        e->rec_top_k = (int32_t)v;
    }
    if (sf_meta_number(e->model, "general.sampling.top_p", &v) && v > 0 && v <= 1) {
        e->rec_has |= SF_REC_TOP_P;
        e->rec_top_p = (float)v;
    }
    if (sf_meta_number(e->model, "general.sampling.min_p", &v) && v >= 0 && v <= 1) {
        e->rec_has |= SF_REC_MIN_P;
        e->rec_min_p = (float)v;
    }
}

// The model's K or V head size ("key_length" or "value_length"): the GGUF's
// <arch>.attention.<which> where it says, else n_embd / n_head, as
// llama.cpp reads it.
static int32_t sf_head_size(const llama_model *m, const char *which) {
    char arch[64] = {};
    llama_model_meta_val_str(m, "general.architecture", arch, sizeof arch);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.%s", arch, which);
    double v = 0;
    if (sf_meta_number(m, key, &v) && v >= 1 && v <= 1 << 20) {
        return (int32_t)v;
    }
    return llama_model_n_embd(m) / std::max(1, llama_model_n_head(m));
}

#if SF_LLAMA_UPSTREAM
static int64_t sf_buffer_bytes(const std::map<ggml_backend_buffer_type_t, size_t> &m) {
    int64_t n = 0;
    for (const auto &kv : m) {
        n += (int64_t)kv.second;
    }
    return n;
}

// The bytes a context cell of a KV cache takes in all of its layers.
static int64_t sf_cell_bytes(const llama_kv_cache *kv) {
    return kv->get_size() > 0 ? sf_buffer_bytes(kv->memory_breakdown()) / (int64_t)kv->get_size() : 0;
}

// The K and V bytes of an attention cache per context cell, counting a
// sliding-window cache (which llama.cpp sizes to the windows of the
// sequences plus a micro-batch, at most the context) by its share of the
// full-attention cache's cells.
static int64_t sf_attn_bytes_per_cell(const llama_kv_cache_iswa *kv) {
    const llama_kv_cache *base = kv->get_base(), *swa = kv->get_swa();
    if (base->get_size() == 0) {
        return 0;
    }
    return (sf_buffer_bytes(base->memory_breakdown()) + sf_buffer_bytes(swa->memory_breakdown())) /
           (int64_t)base->get_size();
}
#endif

// What the context really allocated for its memory, where llama.cpp says
// (the upstream route): the attention caches' bytes per context token
// (sliding-window layers at their cache's share, layers without a KV cache
// not at all), and apart the recurrent layers' state, fixed whatever the
// context. The header formula above (every layer full attention) stays
// where the memory is of another kind, or on the Go module's llama.cpp.
static void sf_measure_memory(sf_engine *e) {
#if SF_LLAMA_UPSTREAM
    llama_memory_i *mem = e->mem;
    if (mem == nullptr) {
        return;
    }
    if (auto *kv = dynamic_cast<llama_kv_cache *>(mem)) {
        e->kv_bytes_per_token = sf_cell_bytes(kv);
    } else if (auto *iswa = dynamic_cast<llama_kv_cache_iswa *>(mem)) {
        e->kv_bytes_per_token = sf_attn_bytes_per_cell(iswa);
    } else if (auto *h = dynamic_cast<llama_memory_hybrid *>(mem)) {
        e->kv_bytes_per_token = sf_cell_bytes(h->get_mem_attn());
        e->recurrent_state_bytes = sf_buffer_bytes(h->get_mem_recr()->memory_breakdown());
    } else if (auto *hi = dynamic_cast<llama_memory_hybrid_iswa *>(mem)) {
        e->kv_bytes_per_token = sf_attn_bytes_per_cell(hi->get_mem_attn());
        e->recurrent_state_bytes = sf_buffer_bytes(hi->get_mem_recr()->memory_breakdown());
    } else if (auto *r = dynamic_cast<llama_memory_recurrent *>(mem)) {
        e->kv_bytes_per_token = 0;
        e->recurrent_state_bytes = sf_buffer_bytes(r->memory_breakdown());
    }
#else
    (void)e;
#endif
}

static void sf_fill_descriptor_cache(sf_engine *e) {
    char buf[64] = {};
    if (llama_model_meta_val_str(e->model, "general.architecture", buf, sizeof buf) > 0) {
        e->arch.assign(buf);
    }
    const char *tmpl = llama_model_chat_template(e->model, nullptr);
    e->chat_template.assign(tmpl != nullptr ? tmpl : "");
    const char *rerank = llama_model_chat_template(e->model, "rerank");
    e->rerank_template.assign(rerank != nullptr ? rerank : "");
    char piece[8];
    for (int32_t t = 0; t < e->n_vocab; t++) {
        if (llama_vocab_is_eog(e->vocab, t)) {
            e->eog.push_back(t);
        }
        int32_t n = llama_token_to_piece(e->vocab, t, piece, 0, 0, true);
        e->max_piece_bytes = std::max(e->max_piece_bytes, n < 0 ? -n : n);
    }
    sf_read_recommended(e);
    // K and V rows per layer: head size * n_head_kv values each.
    int32_t n_head_kv = llama_model_n_head_kv(e->model);
    int64_t k_row = (int64_t)ggml_row_size(e->type_k, (int64_t)sf_head_size(e->model, "key_length") * n_head_kv);
    int64_t v_row = (int64_t)ggml_row_size(e->type_v, (int64_t)sf_head_size(e->model, "value_length") * n_head_kv);
    e->kv_bytes_per_token = (int64_t)llama_model_n_layer(e->model) * (k_row + v_row);
    sf_measure_memory(e);
}

static const char *sf_validate_open(const sf_open_params *p) {
    if (p->model_path == nullptr || p->model_path[0] == '\0') {
        return "no model path";
    }
    if (p->n_ctx < 0 || p->n_seq_max < 1 || p->n_batch < 1 || p->n_ubatch < 0 || p->max_lanes < 1) {
        return "context, sequences, batch and lanes must be positive";
    }
    if ((size_t)p->n_seq_max > llama_max_parallel_sequences()) {
        return "more sequences than llama.cpp supports";
    }
    if (p->max_lanes > p->n_seq_max) {
        return "more lanes than sequences";
    }
    if (p->n_threads < 0 || p->n_threads > GGML_MAX_N_THREADS) {
        return "threads must be within [1, 512] (GGML_MAX_N_THREADS)";
    }
    if (p->poll < -1 || p->poll > 100) {
        return "poll must be within [0, 100], or -1 for no thread pool";
    }
    if (sf_ggml_kv_type(p->type_k) == GGML_TYPE_COUNT || sf_ggml_kv_type(p->type_v) == GGML_TYPE_COUNT) {
        return "unknown KV cache type";
    }
    if (ggml_is_quantized(sf_ggml_kv_type(p->type_v)) && p->flash_attn == 0) {
        // llama.cpp's attention without flash attention reads V transposed,
        // which a quantized row cannot be.
        return "a quantized V cache needs flash attention";
    }
    return nullptr;
}

static llama_context_params sf_context_params(const sf_open_params *p, int32_t pooling) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)p->n_ctx;
    cp.n_batch = (uint32_t)std::max(p->n_batch, p->max_lanes);
    cp.n_ubatch = p->n_ubatch > 0 ? (uint32_t)p->n_ubatch : std::min<uint32_t>(cp.n_batch, 512);
    if (pooling != LLAMA_POOLING_TYPE_NONE) {
        // llama.cpp pools per micro-batch: a sequence split over two would
        // get the second part's pooling alone. One micro-batch per decode,
        // as llama-server sets up for embeddings (n_batch = n_ubatch), keeps
        // every input whole.
        cp.n_ubatch = cp.n_batch;
        cp.embeddings = true;
        cp.pooling_type = (enum llama_pooling_type)pooling;
    }
    cp.n_seq_max = (uint32_t)p->n_seq_max;
    int32_t threads = p->n_threads > 0 ? p->n_threads : 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.type_k = sf_ggml_kv_type(p->type_k);
    cp.type_v = sf_ggml_kv_type(p->type_v);
    int32_t fa = p->flash_attn;
    if (fa < 0 && ggml_is_quantized(cp.type_v)) {
        fa = 1; // as llama.cpp resolves it: "auto" could not turn it off
    }
    cp.flash_attn_type = fa < 0 ? LLAMA_FLASH_ATTN_TYPE_AUTO
                         : fa == 0 ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                   : LLAMA_FLASH_ATTN_TYPE_ENABLED;
#if SF_LLAMA_UPSTREAM
    if (pooling != LLAMA_POOLING_TYPE_NONE) {
        // An input's vector should not depend on what else shares its
        // call. Upstream's CPU flash-attention kernel rounds differently
        // with the micro-batch's shape (a 6-input batch against the same
        // input alone: 0.42934 against 0.42964 on the tiny f16 model);
        // plain attention stays within 1.5e-4 (e2e/embed_tolerance_*).
        // The module's llama.cpp is within 1e-5 with flash attention and
        // worse without (3e-5), so it keeps the configured kernel. An
        // embedding call's KV pool is one micro-batch: f16 cells and plain
        // attention cost little.
        cp.type_k = GGML_TYPE_F16;
        cp.type_v = GGML_TYPE_F16;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
#endif
    // One pool of KV cells for every sequence: a long prompt may use the
    // whole context and copied prefixes share cells instead of duplicating.
    cp.kv_unified = true;
    // A sliding-window layer keeps only its window's cells (plus a
    // micro-batch), as llama-server does: llama.cpp's own default keeps
    // the whole context, and its attention then reads every cell of a long
    // prompt only to mask most of them out. A cut further back than the
    // window resumes from a checkpoint (seq.cpp), as it must anyway once
    // masked cells are reused; measured on synth gemma4 small: the same
    // cached shares (0.827 edit, 0.975 second turn) with either setting.
    cp.swa_full = false;
    cp.no_perf = true;
    return cp;
}

// Frees whatever of the engine exists; safe on a half-opened one.
static void sf_destroy(sf_engine *e) {
    for (sf_lane &l : e->slots) {
        sf_lane_release(&l);
    }
    for (sf_lane &l : e->staged) {
        sf_lane_release(&l);
    }
    sf_grammar_table_clear(e);
    sf_mtp_free(e);
    if (e->batch.token != nullptr) {
        llama_batch_free(e->batch);
    }
    llama_free(e->ctx);
    llama_model_free(e->model);
    delete e;
}

// Opens the engine into *out; returns null or the reason it failed.
static const char *sf_open_impl(const sf_open_params *p, sf_engine **out, char *msg, size_t msg_len) {
    if (const char *why = sf_validate_open(p)) {
        return why;
    }
    llama_backend_init();

    sf_engine *e = new sf_engine();
    *out = e;
    e->err.reserve(SF_ERR_MAX);
    if (const char *why = sf_unknown_arch(p->model_path, msg, msg_len)) {
        return why;
    }
    llama_model_params mp = llama_model_default_params();
#if SF_LLAMA_UPSTREAM
    // Upstream folded use_mmap/use_mlock into one load mode.
    mp.load_mode = p->use_mmap != 0 ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
    // The multi-token prediction layers are skipped unless asked for.
    mp.load_mtp = p->mtp != 0;
#else
    mp.use_mmap = p->use_mmap != 0;
#endif
    mp.n_gpu_layers = p->n_gpu_layers;
    mp.use_extra_bufts = p->use_extra_bufts != 0;
    e->model = llama_model_load_from_file(p->model_path, mp);
    if (e->model == nullptr) {
        snprintf(msg, msg_len, "cannot load model %s (see debug log for llama.cpp's reason)", p->model_path);
        return msg;
    }
    char arch[64] = {};
    llama_model_meta_val_str(e->model, "general.architecture", arch, sizeof arch);
    e->pooling = sf_model_pooling(e->model, arch);
    if (e->pooling < 0) {
        return "the model's pooling_type is one this engine does not pool by (mean, cls, last and rank are)";
    }
    if (const char *why = sf_lora_load(e, p, msg, msg_len)) {
        return why;
    }
    llama_context_params cp = sf_context_params(p, e->pooling);
    // ggml aborts the process on a quantized KV row that is not whole
    // blocks; refuse such a model here instead (for the types the context
    // will hold: an embedding context's may be f16 whatever was asked).
    const struct {
        const char *cache, *which;
        ggml_type type;
    } caches[] = {{"K", "key_length", cp.type_k}, {"V", "value_length", cp.type_v}};
    for (const auto &c : caches) {
        int32_t head = sf_head_size(e->model, c.which);
        int64_t block = ggml_blck_size(c.type);
        if (block > 1 && head % block != 0) {
            snprintf(msg, msg_len, "a %s cache of type %s needs a head size divisible by %lld; this model's is %d", c.cache,
                     ggml_type_name(c.type), (long long)block, head);
            return msg;
        }
    }
#if SF_LLAMA_UPSTREAM
    cp.n_rs_seq = sf_rollback_depth_to_ask(e->model, p, cp.n_ubatch, e->pooling);
    const uint32_t rs_asked = cp.n_rs_seq;
#else
    const uint32_t rs_asked = 0;
#endif
    // One llama.cpp sequence past those the caller has is the engine's
    // own scratch: a full-attention sequence's tail passes through it on
    // export and import (seq.cpp). Only a full-attention model has tails:
    // a recurrent one would pay a state for it, a sliding-window one a
    // window of cells in every such layer (llama.cpp sizes them by
    // sequence).
    const bool scratch = e->pooling == LLAMA_POOLING_TYPE_NONE && !llama_model_is_recurrent(e->model) &&
                         !llama_model_is_hybrid(e->model) && llama_model_n_swa(e->model) == 0 &&
                         (size_t)cp.n_seq_max < llama_max_parallel_sequences();
    cp.n_seq_max += scratch ? 1 : 0;
    e->ctx = llama_init_from_model(e->model, cp);
    if (e->ctx == nullptr) {
        return "cannot create a llama.cpp context with these parameters";
    }
    sf_rollback_opened(e, p, rs_asked);
    e->pool = p->poll < 0 ? nullptr : sf_pool_get(llama_n_threads(e->ctx), p->poll);
    if (e->pool != nullptr) {
        llama_attach_threadpool(e->ctx, e->pool->tp, e->pool->tp);
    }
    e->vocab = llama_model_get_vocab(e->model);
    e->mem = llama_get_memory(e->ctx);
    e->n_ctx = (int32_t)llama_n_ctx(e->ctx);
    e->n_seq_max = (int32_t)llama_n_seq_max(e->ctx) - (scratch ? 1 : 0);
    e->scratch_seq = scratch ? e->n_seq_max : -1;
    e->n_batch = (int32_t)llama_n_batch(e->ctx);
    e->max_lanes = p->max_lanes;
    e->n_vocab = llama_vocab_n_tokens(e->vocab);
#if SF_LLAMA_UPSTREAM
    // Upstream models may project their output to another width.
    e->n_embd = llama_model_n_embd_out(e->model);
#else
    e->n_embd = llama_model_n_embd(e->model);
#endif
    if (e->pooling == LLAMA_POOLING_TYPE_RANK) {
        // A reranker pools into its classifier head: one score per label.
        e->n_embd = (int32_t)llama_model_n_cls_out(e->model);
        if (e->n_embd < 1) {
            return "the reranker has no classifier labels to score";
        }
    }
    e->kv_type = sf_kv_state_code(p->type_k, p->type_v);
    e->type_k = cp.type_k;
    e->type_v = cp.type_v;
    memcpy(e->model_id, p->model_id, sizeof e->model_id);
    e->seq_lane.assign((size_t)e->n_seq_max, -1);
    e->ckpts.resize((size_t)e->n_seq_max);
    if (llama_model_is_recurrent(e->model) || llama_model_is_hybrid(e->model)) {
        e->partial = SF_PARTIAL_RECURRENT;
    } else if (llama_model_n_swa(e->model) > 0) {
        e->partial = SF_PARTIAL_SWA;
        e->n_swa = llama_model_n_swa(e->model);
    }
    e->batch = llama_batch_init(e->n_batch, 0, 1);
    e->row_lane.assign((size_t)e->n_batch, nullptr);
    e->slots.resize((size_t)e->max_lanes);
    e->staged.reserve((size_t)e->max_lanes);
    e->touched.reserve((size_t)e->max_lanes);
    e->top_scratch.reserve(SF_MAX_LOGPROBS + 1);
    e->cand.resize((size_t)e->n_vocab);
    if (p->mtp != 0) {
        if (const char *why = sf_mtp_open(e, cp, msg, msg_len)) {
            return why;
        }
    }
    sf_fill_descriptor_cache(e);
    return nullptr;
}

sf_engine *sf_open(const sf_open_params *p, char *err, size_t err_len) {
    auto fail = [&](const char *msg) {
        if (err != nullptr && err_len > 0) {
            snprintf(err, err_len, "%s", msg);
        }
    };
    if (p == nullptr) {
        fail("no parameters");
        return nullptr;
    }
    sf_engine *e = nullptr;
    char msg[600] = {};
    const char *why = sf_guard([&] { return sf_open_impl(p, &e, msg, sizeof msg); },
                               [&](const char *what) -> const char * {
                                   snprintf(msg, sizeof msg, "opening the model: %s", what);
                                   return msg;
                               });
    if (why != nullptr) {
        fail(why);
        if (e != nullptr) {
            sf_guard([&] { sf_destroy(e); return 0; }, [](const char *) { return 0; });
        }
        return nullptr;
    }
    return e;
}

void sf_close(sf_engine *e) {
    if (e == nullptr) {
        return;
    }
    sf_guard([&] { sf_destroy(e); return 0; }, [](const char *) { return 0; });
}

const char *sf_last_error(const sf_engine *e) {
    return e != nullptr ? e->err.c_str() : "no engine";
}

void sf_inject_exception(sf_engine *e, int32_t where) {
    if (e != nullptr) {
        __atomic_store_n(&e->inject, where, __ATOMIC_RELEASE);
    }
}

static void sf_describe_impl(const sf_engine *e, sf_desc *d) {
    memset(d, 0, sizeof *d);
    snprintf(d->arch, sizeof d->arch, "%s", e->arch.c_str());
    d->n_vocab = e->n_vocab;
    d->n_ctx = e->n_ctx;
    d->n_ctx_train = llama_model_n_ctx_train(e->model);
    d->n_seq_max = e->n_seq_max;
    d->n_batch = e->n_batch;
    d->n_embd = llama_model_n_embd(e->model);
    d->n_layer = llama_model_n_layer(e->model);
    d->kv_bytes_per_token = e->kv_bytes_per_token;
    d->recurrent_state_bytes = e->recurrent_state_bytes;
    d->mtp_bytes = e->mtp_bytes;
    snprintf(d->type_k, sizeof d->type_k, "%s", ggml_type_name(e->type_k));
    snprintf(d->type_v, sizeof d->type_v, "%s", ggml_type_name(e->type_v));
    d->bos = llama_vocab_bos(e->vocab);
    d->eos = llama_vocab_eos(e->vocab);
    d->eot = llama_vocab_eot(e->vocab);
    d->fim_pre = llama_vocab_fim_pre(e->vocab);
    d->fim_suf = llama_vocab_fim_suf(e->vocab);
    d->fim_mid = llama_vocab_fim_mid(e->vocab);
    d->fim_pad = llama_vocab_fim_pad(e->vocab);
    d->fim_rep = llama_vocab_fim_rep(e->vocab);
    d->fim_sep = llama_vocab_fim_sep(e->vocab);
    d->add_bos = llama_vocab_get_add_bos(e->vocab) ? 1 : 0;
    d->add_eos = llama_vocab_get_add_eos(e->vocab) ? 1 : 0;
    d->add_sep = llama_vocab_get_add_sep(e->vocab) ? 1 : 0;
    d->sep = llama_vocab_sep(e->vocab);
    d->rerank_template = e->rerank_template.c_str();
    d->n_lora = (int32_t)e->loras.size();
    d->partial_truncation = e->partial == SF_PARTIAL_NONE ? 1 : 0;
    d->partial = e->partial;
    d->n_swa = e->n_swa;
    d->ckpt_every = e->partial != SF_PARTIAL_NONE ? SF_CKPT_EVERY : 0;
    d->ckpt_max = e->partial != SF_PARTIAL_NONE ? SF_CKPT_MAX : 0;
    d->ckpt_tail = e->partial == SF_PARTIAL_RECURRENT ? SF_CKPT_TAIL : 0;
    d->n_eog = (int32_t)e->eog.size();
    d->eog = e->eog.data();
    d->chat_template = e->chat_template.c_str();
    d->n_params = llama_model_n_params(e->model);
    d->model_bytes = llama_model_size(e->model);
    d->rec_has = e->rec_has;
    d->rec_top_k = e->rec_top_k;
    d->rec_top_p = e->rec_top_p;
    d->rec_min_p = e->rec_min_p;
    d->max_piece_bytes = e->max_piece_bytes;
    d->pooling = e->pooling;
    d->n_embd_pooled = e->n_embd;
    // Drafts need a sequence cut back after a rejected one: recurrent
    // state only through llama.cpp's rollback snapshots (rollback.cpp).
    d->drafts_refused = sf_drafts_refused(e);
    d->drafts = d->drafts_refused == nullptr ? 1 : 0;
    d->draft_max = e->partial == SF_PARTIAL_RECURRENT ? e->n_rs_seq : 0;
}

int sf_describe(const sf_engine *e, sf_desc *d) {
    if (e == nullptr || d == nullptr) {
        return SF_ERR_INVALID;
    }
    return sf_guard([&] { sf_describe_impl(e, d); return (int)SF_OK; },
                    [](const char *) { return (int)SF_ERR_EXCEPTION; });
}

// The text calls' shared failure path: the reason into the caller's buffer.
static int32_t sf_text_fail(char *err, int32_t err_cap, const char *op, const char *msg) {
    sf_set_err(err, err_cap, op, msg);
    return SF_TEXT_FAILED;
}

int32_t sf_tokenize(const sf_engine *e, const char *text, int32_t text_len, int32_t *out, int32_t cap,
                    int32_t add_special, int32_t parse_special, char *err, int32_t err_cap) {
    if (e == nullptr || text_len < 0 || cap < 0 || (text == nullptr && text_len > 0) || (out == nullptr && cap > 0)) {
        return sf_text_fail(err, err_cap, "tokenize", "invalid arguments");
    }
    return sf_guard(
        [&] {
            int32_t expected = SF_INJECT_TOKENIZE;
            if (__atomic_compare_exchange_n(const_cast<int32_t *>(&e->inject), &expected, SF_INJECT_NONE, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                throw std::runtime_error("injected by a test");
            }
            int32_t n = llama_tokenize(e->vocab, text != nullptr ? text : "", text_len, out, cap, add_special != 0,
                                       parse_special != 0);
            return n == SF_TEXT_FAILED ? sf_text_fail(err, err_cap, "tokenize", "more tokens than an int32 counts") : n;
        },
        [&](const char *msg) { return sf_text_fail(err, err_cap, "tokenize", msg); });
}

int32_t sf_token_piece(const sf_engine *e, int32_t token, char *out, int32_t cap, int32_t special, char *err,
                       int32_t err_cap) {
    if (e == nullptr || token < 0 || token >= e->n_vocab || cap < 0 || (out == nullptr && cap > 0)) {
        return sf_text_fail(err, err_cap, "token piece", "invalid arguments");
    }
    return sf_guard([&] { return llama_token_to_piece(e->vocab, token, out, cap, 0, special != 0); },
                    [&](const char *msg) { return sf_text_fail(err, err_cap, "token piece", msg); });
}

int32_t sf_detokenize(const sf_engine *e, const int32_t *tokens, int32_t n, char *out, int32_t cap, int32_t special,
                      char *err, int32_t err_cap) {
    if (e == nullptr || n < 0 || cap < 0 || (tokens == nullptr && n > 0) || (out == nullptr && cap > 0)) {
        return sf_text_fail(err, err_cap, "detokenize", "invalid arguments");
    }
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= e->n_vocab) {
            return sf_text_fail(err, err_cap, "detokenize", "a token outside the vocabulary");
        }
    }
    return sf_guard([&] { return llama_detokenize(e->vocab, tokens, n, out, cap, false, special != 0); },
                    [&](const char *msg) { return sf_text_fail(err, err_cap, "detokenize", msg); });
}

static int sf_chat_apply_impl(const sf_engine *e, const char *tmpl, const char *const *roles,
                              const char *const *contents, int32_t n_msg, int32_t add_assistant, char *out,
                              int32_t cap, int32_t *needed, char *err, int32_t err_cap) {
    const char *t = (tmpl != nullptr && tmpl[0] != '\0') ? tmpl : e->chat_template.c_str();
    if (t[0] == '\0') {
        sf_set_err(err, err_cap, "chat template", "the model has no chat template");
        return SF_ERR_TEMPLATE;
    }
    std::vector<llama_chat_message> msgs((size_t)n_msg);
    for (int32_t i = 0; i < n_msg; i++) {
        if (roles[i] == nullptr || contents[i] == nullptr) {
            sf_set_err(err, err_cap, "chat template", "a message has no role or content");
            return SF_ERR_INVALID;
        }
        msgs[(size_t)i] = llama_chat_message{roles[i], contents[i]};
    }
    int32_t n = llama_chat_apply_template(t, msgs.data(), msgs.size(), add_assistant != 0, out, cap);
    if (n < 0) {
        sf_set_err(err, err_cap, "chat template", "llama.cpp's built-in templates do not match this chat template");
        return SF_ERR_TEMPLATE;
    }
    *needed = n;
    if (n > cap) {
        sf_set_err(err, err_cap, "chat template", "the output buffer is too small");
        return SF_ERR_BUFFER;
    }
    return SF_OK;
}

int sf_chat_apply(const sf_engine *e, const char *tmpl, const char *const *roles, const char *const *contents,
                  int32_t n_msg, int32_t add_assistant, char *out, int32_t cap, int32_t *needed, char *err,
                  int32_t err_cap) {
    if (e == nullptr || n_msg < 0 || cap < 0 || needed == nullptr ||
        (n_msg > 0 && (roles == nullptr || contents == nullptr))) {
        sf_set_err(err, err_cap, "chat template", "invalid arguments");
        return SF_ERR_INVALID;
    }
    return sf_guard(
        [&] {
            return sf_chat_apply_impl(e, tmpl, roles, contents, n_msg, add_assistant, out, cap, needed, err, err_cap);
        },
        [&](const char *msg) {
            sf_set_err(err, err_cap, "chat template", msg);
            return (int)SF_ERR_EXCEPTION;
        });
}
