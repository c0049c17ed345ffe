// seq.cpp — sequence primitives for the prefix cache: copy, truncate, free,
// export and import.
#include <cstring>

#include "internal.h"

namespace {

// Exported state starts with this header so that import can refuse bytes
// that are not ours, belong to another model, or were damaged.
struct sf_state_header {
    char magic[4];  // "SFKV"
    uint32_t version;
    uint8_t model_id[32];
    int32_t kv_type;
    uint32_t n_tokens;
    uint64_t payload_len;
    uint64_t checksum;  // FNV-1a over the payload
};

constexpr uint32_t SF_STATE_VERSION = 1;

uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

int check_seq(sf_engine *e, int32_t seq, const char *op) {
    if (seq < 0 || seq >= e->n_seq_max) {
        return sf_fail(e, SF_ERR_SEQ_RANGE, "%s: sequence %d outside [0, %d)", op, seq, e->n_seq_max);
    }
    return SF_OK;
}

int check_idle(sf_engine *e, int32_t seq, const char *op) {
    if (int rc = check_seq(e, seq, op)) {
        return rc;
    }
    if (e->seq_lane[(size_t)seq] >= 0) {
        return sf_fail(e, SF_ERR_SEQ_BUSY, "%s: sequence %d carries lane %lld", op, seq,
                       (long long)e->seq_lane[(size_t)seq]);
    }
    return SF_OK;
}

}  // namespace

static int32_t sf_seq_length_impl(const sf_engine *e, int32_t seq) {
    if (e == nullptr || seq < 0 || seq >= e->n_seq_max) {
        return -1;
    }
    return llama_memory_seq_pos_max(e->mem, seq) + 1;
}

static int sf_seq_copy_impl(sf_engine *e, int32_t src, int32_t dst, int32_t n_tokens) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_seq(e, src, "copy")) {
        return rc;
    }
    if (int rc = check_idle(e, dst, "copy")) {
        return rc;
    }
    if (src == dst) {
        return sf_fail(e, SF_ERR_INVALID, "copy: source and target are both sequence %d", src);
    }
    int32_t have = sf_seq_length_impl(e, src);
    if (n_tokens < 0 || n_tokens > have) {
        return sf_fail(e, SF_ERR_INVALID, "copy: %d tokens of a sequence holding %d", n_tokens, have);
    }
    llama_memory_seq_rm(e->mem, dst, -1, -1);
    if (n_tokens > 0) {
        llama_memory_seq_cp(e->mem, src, dst, 0, n_tokens);
    }
    return SF_OK;
}

static int sf_seq_truncate_impl(sf_engine *e, int32_t seq, int32_t n_keep) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_idle(e, seq, "truncate")) {
        return rc;
    }
    if (n_keep < 0) {
        return sf_fail(e, SF_ERR_INVALID, "truncate: negative length %d", n_keep);
    }
    if (!llama_memory_seq_rm(e->mem, seq, n_keep, -1)) {
        return sf_fail(e, SF_ERR_UNSUPPORTED, "truncate: this model's memory cannot be cut at %d", n_keep);
    }
    return SF_OK;
}

static int sf_seq_free_impl(sf_engine *e, int32_t seq) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_idle(e, seq, "free")) {
        return rc;
    }
    llama_memory_seq_rm(e->mem, seq, -1, -1);
    return SF_OK;
}

static int sf_seq_export_impl(sf_engine *e, int32_t seq, uint8_t *out, size_t cap, size_t *needed) {
    if (e == nullptr || needed == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_seq(e, seq, "export")) {
        return rc;
    }
    size_t payload = llama_state_seq_get_size(e->ctx, seq);
    *needed = sizeof(sf_state_header) + payload;
    if (out == nullptr || cap < *needed) {
        return sf_fail(e, SF_ERR_BUFFER, "export: needs %zu bytes, has %zu", *needed, cap);
    }
    uint8_t *body = out + sizeof(sf_state_header);
    size_t wrote = llama_state_seq_get_data(e->ctx, body, payload, seq);
    if (wrote == 0 || wrote > payload) {
        return sf_fail(e, SF_ERR_STATE, "export: llama.cpp wrote %zu of %zu bytes", wrote, payload);
    }
    sf_state_header h{};
    memcpy(h.magic, "SFKV", 4);
    h.version = SF_STATE_VERSION;
    memcpy(h.model_id, e->model_id, sizeof h.model_id);
    h.kv_type = e->kv_type;
    h.n_tokens = (uint32_t)sf_seq_length_impl(e, seq);
    h.payload_len = wrote;
    h.checksum = fnv1a(body, wrote);
    memcpy(out, &h, sizeof h);
    *needed = sizeof h + wrote;
    return SF_OK;
}

static int sf_seq_import_impl(sf_engine *e, int32_t seq, const uint8_t *data, size_t len, int32_t *n_tokens) {
    if (e == nullptr || n_tokens == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_idle(e, seq, "import")) {
        return rc;
    }
    sf_state_header h{};
    if (data == nullptr || len < sizeof h) {
        return sf_fail(e, SF_ERR_STATE, "import: %zu bytes are too few for a state header", len);
    }
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, "SFKV", 4) != 0 || h.version != SF_STATE_VERSION) {
        return sf_fail(e, SF_ERR_STATE, "import: not superfluid KV state (bad magic or version)");
    }
    if (memcmp(h.model_id, e->model_id, sizeof h.model_id) != 0) {
        return sf_fail(e, SF_ERR_STATE, "import: the state belongs to another model");
    }
    if (h.kv_type != e->kv_type) {
        return sf_fail(e, SF_ERR_STATE, "import: the state has KV type %d, the engine %d", h.kv_type, e->kv_type);
    }
    if (h.payload_len != len - sizeof h) {
        return sf_fail(e, SF_ERR_STATE, "import: header says %llu payload bytes, %zu present",
                       (unsigned long long)h.payload_len, len - sizeof h);
    }
    const uint8_t *body = data + sizeof h;
    if (fnv1a(body, (size_t)h.payload_len) != h.checksum) {
        return sf_fail(e, SF_ERR_STATE, "import: checksum mismatch");
    }
    if (h.n_tokens > (uint32_t)e->n_ctx) {
        return sf_fail(e, SF_ERR_CONTEXT, "import: %u tokens exceed the context of %d", h.n_tokens, e->n_ctx);
    }
    llama_memory_seq_rm(e->mem, seq, -1, -1);
    size_t read = llama_state_seq_set_data(e->ctx, body, (size_t)h.payload_len, seq);
    if (read == 0) {
        llama_memory_seq_rm(e->mem, seq, -1, -1);
        return sf_fail(e, SF_ERR_STATE, "import: llama.cpp refused the state (see debug log)");
    }
    *n_tokens = sf_seq_length_impl(e, seq);
    if (*n_tokens != (int32_t)h.n_tokens) {
        llama_memory_seq_rm(e->mem, seq, -1, -1);
        return sf_fail(e, SF_ERR_STATE, "import: restored %d tokens, the header says %u", *n_tokens, h.n_tokens);
    }
    return SF_OK;
}

// The ABI: each call inside the exception guard.
int32_t sf_seq_length(const sf_engine *e, int32_t seq) {
    return sf_guard([&] { return sf_seq_length_impl(e, seq); }, [](const char *) { return (int32_t)-1; });
}

int sf_seq_copy(sf_engine *e, int32_t src, int32_t dst, int32_t n_tokens) {
    return sf_guard([&] { return sf_seq_copy_impl(e, src, dst, n_tokens); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "seq copy: %s", msg); });
}

int sf_seq_truncate(sf_engine *e, int32_t seq, int32_t n_keep) {
    return sf_guard([&] { return sf_seq_truncate_impl(e, seq, n_keep); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "seq truncate: %s", msg); });
}

int sf_seq_free(sf_engine *e, int32_t seq) {
    return sf_guard([&] { return sf_seq_free_impl(e, seq); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "seq free: %s", msg); });
}

int sf_seq_export(sf_engine *e, int32_t seq, uint8_t *out, size_t cap, size_t *needed) {
    return sf_guard([&] { return sf_seq_export_impl(e, seq, out, cap, needed); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "seq export: %s", msg); });
}

int sf_seq_import(sf_engine *e, int32_t seq, const uint8_t *data, size_t len, int32_t *n_tokens) {
    return sf_guard([&] { return sf_seq_import_impl(e, seq, data, len, n_tokens); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "seq import: %s", msg); });
}
