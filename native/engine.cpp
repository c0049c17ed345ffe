// engine.cpp — opening and describing a model, text, logging.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>

#include "ggml-backend.h"
#include "ggml.h"
#include "internal.h"

int sf_fail(sf_engine *e, int code, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (e != nullptr) {
        e->err.assign(buf);
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

void sf_set_log(sf_log_fn fn) {
    g_log_fn = fn;
    llama_log_set(sf_log_bridge, nullptr);
    ggml_log_set(sf_log_bridge, nullptr);
}

int32_t sf_cpu_features(char *out, int32_t cap) {
    if (out == nullptr || cap <= 0) {
        return -1;
    }
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

int32_t sf_load_backends(const char *dir) {
    if (dir != nullptr && dir[0] != '\0') {
        ggml_backend_load_all_from_path(dir);
    }
    return (int32_t)ggml_backend_dev_count();
}

static ggml_type sf_ggml_kv_type(int32_t t) {
    switch (t) {
    case SF_KV_Q8_0:
        return GGML_TYPE_Q8_0;
    case SF_KV_Q4_0:
        return GGML_TYPE_Q4_0;
    default:
        return GGML_TYPE_F16;
    }
}

static void sf_fill_descriptor_cache(sf_engine *e) {
    char buf[64] = {};
    if (llama_model_meta_val_str(e->model, "general.architecture", buf, sizeof buf) > 0) {
        e->arch.assign(buf);
    }
    const char *tmpl = llama_model_chat_template(e->model, nullptr);
    e->chat_template.assign(tmpl != nullptr ? tmpl : "");
    for (int32_t t = 0; t < e->n_vocab; t++) {
        if (llama_vocab_is_eog(e->vocab, t)) {
            e->eog.push_back(t);
        }
    }
    // K and V rows per layer: head_dim * n_head_kv values each.
    int32_t n_embd = llama_model_n_embd(e->model);
    int32_t n_head = std::max(1, llama_model_n_head(e->model));
    int32_t n_head_kv = llama_model_n_head_kv(e->model);
    int64_t kv_dim = (int64_t)(n_embd / n_head) * n_head_kv;
    ggml_type t = sf_ggml_kv_type(e->kv_type);
    e->kv_bytes_per_token = (int64_t)llama_model_n_layer(e->model) * 2 * (int64_t)ggml_row_size(t, kv_dim);
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
    if (p->kv_type < SF_KV_F16 || p->kv_type > SF_KV_Q4_0) {
        return "unknown KV cache type";
    }
    if (p->kv_type != SF_KV_F16 && p->flash_attn == 0) {
        return "a quantized KV cache needs flash attention";
    }
    return nullptr;
}

static llama_context_params sf_context_params(const sf_open_params *p) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)p->n_ctx;
    cp.n_batch = (uint32_t)std::max(p->n_batch, p->max_lanes);
    cp.n_ubatch = p->n_ubatch > 0 ? (uint32_t)p->n_ubatch : std::min<uint32_t>(cp.n_batch, 512);
    cp.n_seq_max = (uint32_t)p->n_seq_max;
    int32_t threads = p->n_threads > 0 ? p->n_threads : 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.type_k = sf_ggml_kv_type(p->kv_type);
    cp.type_v = sf_ggml_kv_type(p->kv_type);
    int32_t fa = p->flash_attn;
    if (fa < 0 && p->kv_type != SF_KV_F16) {
        fa = 1;
    }
    cp.flash_attn_type = fa < 0 ? LLAMA_FLASH_ATTN_TYPE_AUTO
                         : fa == 0 ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                   : LLAMA_FLASH_ATTN_TYPE_ENABLED;
    // One pool of KV cells for every sequence: a long prompt may use the
    // whole context and copied prefixes share cells instead of duplicating.
    cp.kv_unified = true;
    cp.no_perf = true;
    return cp;
}

sf_engine *sf_open(const sf_open_params *p, char *err, size_t err_len) {
    auto fail = [&](const char *msg) -> sf_engine * {
        if (err != nullptr && err_len > 0) {
            snprintf(err, err_len, "%s", msg);
        }
        return nullptr;
    };
    if (p == nullptr) {
        return fail("no parameters");
    }
    if (const char *why = sf_validate_open(p)) {
        return fail(why);
    }
    llama_backend_init();

    sf_engine *e = new (std::nothrow) sf_engine();
    if (e == nullptr) {
        return fail("out of memory");
    }
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = p->use_mmap != 0;
    mp.n_gpu_layers = p->n_gpu_layers;
    e->model = llama_model_load_from_file(p->model_path, mp);
    if (e->model == nullptr) {
        delete e;
        char msg[600];
        snprintf(msg, sizeof msg, "cannot load model %s (see debug log for llama.cpp's reason)", p->model_path);
        return fail(msg);
    }
    if (p->kv_type != SF_KV_F16) {
        // ggml aborts the process on a quantized KV row that is not whole
        // blocks; refuse such a model here instead.
        int32_t head_dim = llama_model_n_embd(e->model) / std::max(1, llama_model_n_head(e->model));
        int64_t block = ggml_blck_size(sf_ggml_kv_type(p->kv_type));
        if (block > 1 && head_dim % block != 0) {
            llama_model_free(e->model);
            delete e;
            char msg[200];
            snprintf(msg, sizeof msg, "a quantized KV cache needs a head dimension divisible by %lld; this model's is %d",
                     (long long)block, head_dim);
            return fail(msg);
        }
    }
    e->ctx = llama_init_from_model(e->model, sf_context_params(p));
    if (e->ctx == nullptr) {
        llama_model_free(e->model);
        delete e;
        return fail("cannot create a llama.cpp context with these parameters");
    }
    e->vocab = llama_model_get_vocab(e->model);
    e->mem = llama_get_memory(e->ctx);
    e->n_ctx = (int32_t)llama_n_ctx(e->ctx);
    e->n_seq_max = (int32_t)llama_n_seq_max(e->ctx);
    e->n_batch = (int32_t)llama_n_batch(e->ctx);
    e->max_lanes = p->max_lanes;
    e->n_vocab = llama_vocab_n_tokens(e->vocab);
    e->kv_type = p->kv_type;
    memcpy(e->model_id, p->model_id, sizeof e->model_id);
    e->seq_lane.assign((size_t)e->n_seq_max, -1);
    e->batch = llama_batch_init(e->n_batch, 0, 1);
    e->row_lane.assign((size_t)e->n_batch, nullptr);
    e->lanes.reserve((size_t)e->max_lanes * 2);
    e->touched.reserve((size_t)e->max_lanes);
    e->top_scratch.reserve(SF_MAX_LOGPROBS + 1);
    sf_fill_descriptor_cache(e);
    return e;
}

void sf_close(sf_engine *e) {
    if (e == nullptr) {
        return;
    }
    for (auto &kv : e->lanes) {
        llama_sampler_free(kv.second.chain);
    }
    llama_batch_free(e->batch);
    llama_free(e->ctx);
    llama_model_free(e->model);
    delete e;
}

const char *sf_last_error(const sf_engine *e) {
    return e != nullptr ? e->err.c_str() : "no engine";
}

int32_t *sf_yield_word(sf_engine *e) {
    return e != nullptr ? &e->yield : nullptr;
}

int sf_describe(const sf_engine *e, sf_desc *d) {
    if (e == nullptr || d == nullptr) {
        return SF_ERR_INVALID;
    }
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
    d->partial_truncation = (llama_model_is_recurrent(e->model) || llama_model_is_hybrid(e->model)) ? 0 : 1;
    d->n_eog = (int32_t)e->eog.size();
    d->eog = e->eog.data();
    d->chat_template = e->chat_template.c_str();
    d->n_params = llama_model_n_params(e->model);
    d->model_bytes = llama_model_size(e->model);
    return SF_OK;
}

int32_t sf_tokenize(const sf_engine *e, const char *text, int32_t text_len, int32_t *out, int32_t cap,
                    int32_t add_special, int32_t parse_special) {
    if (e == nullptr || text_len < 0 || cap < 0 || (text == nullptr && text_len > 0)) {
        return 0;
    }
    return llama_tokenize(e->vocab, text != nullptr ? text : "", text_len, out, cap, add_special != 0,
                          parse_special != 0);
}

int32_t sf_token_piece(const sf_engine *e, int32_t token, char *out, int32_t cap, int32_t special) {
    if (e == nullptr || token < 0 || token >= e->n_vocab || cap < 0) {
        return 0;
    }
    return llama_token_to_piece(e->vocab, token, out, cap, 0, special != 0);
}

int32_t sf_detokenize(const sf_engine *e, const int32_t *tokens, int32_t n, char *out, int32_t cap,
                      int32_t special) {
    if (e == nullptr || n < 0 || cap < 0) {
        return 0;
    }
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= e->n_vocab) {
            return 0;
        }
    }
    return llama_detokenize(e->vocab, tokens, n, out, cap, false, special != 0);
}

int sf_chat_apply(const sf_engine *e, const char *tmpl, const char *const *roles, const char *const *contents,
                  int32_t n_msg, int32_t add_assistant, char *out, int32_t cap, int32_t *needed) {
    if (e == nullptr || n_msg < 0 || cap < 0 || needed == nullptr) {
        return SF_ERR_INVALID;
    }
    sf_engine *me = const_cast<sf_engine *>(e);
    const char *t = (tmpl != nullptr && tmpl[0] != '\0') ? tmpl : e->chat_template.c_str();
    if (t[0] == '\0') {
        return sf_fail(me, SF_ERR_TEMPLATE, "the model has no chat template");
    }
    std::vector<llama_chat_message> msgs((size_t)n_msg);
    for (int32_t i = 0; i < n_msg; i++) {
        if (roles[i] == nullptr || contents[i] == nullptr) {
            return sf_fail(me, SF_ERR_INVALID, "message %d has no role or content", i);
        }
        msgs[(size_t)i] = llama_chat_message{roles[i], contents[i]};
    }
    int32_t n = llama_chat_apply_template(t, msgs.data(), msgs.size(), add_assistant != 0, out, cap);
    if (n < 0) {
        return sf_fail(me, SF_ERR_TEMPLATE, "llama.cpp's built-in templates do not match this chat template");
    }
    *needed = n;
    if (n > cap) {
        return sf_fail(me, SF_ERR_BUFFER, "chat template output needs %d bytes", n);
    }
    return SF_OK;
}
