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
    uint64_t checksum;  // over the payload: block_checksum (version 2), fnv1a (version 1)
};

// Version 2 changed only the checksum; blobs of version 1 (parked before)
// are still read.
constexpr uint32_t SF_STATE_VERSION = 2;
constexpr uint32_t SF_STATE_VERSION_FNV = 1;

// Checkpoint blobs carry the same header under their own magic, so that a
// checkpoint is never imported as a whole sequence nor the reverse.
constexpr char SF_MAGIC_STATE[4] = {'S', 'F', 'K', 'V'};
constexpr char SF_MAGIC_CKPT[4] = {'S', 'F', 'C', 'P'};
// A tail blob (sf_seq_export_tail) too, never taken for either; its
// payload starts with the position the tail starts at (uint32), then
// llama.cpp's state of the tail's cells.
constexpr char SF_MAGIC_TAIL[4] = {'S', 'F', 'K', 'T'};

constexpr uint64_t checksum_basis = 1469598103934665603ull;
constexpr uint64_t checksum_prime = 1099511628211ull;

// fnv1a is version 1's checksum, byte by byte (its offset basis is one
// digit short of the standard FNV one; park/lossy.go mirrors it).
uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = checksum_basis;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * checksum_prime;
    }
    return h;
}

uint64_t rotl29(uint64_t x) { return x << 29 | x >> 35; }

// block_checksum is version 2's: FNV-1a's xor-and-multiply on four lanes of
// little-endian 64-bit words in turn, rotated so that high bits reach low
// ones, the bytes after the last 32-byte block byte by byte on lane 0, and
// the lanes and length folded the same way. One multiply chain per byte
// ran at ~0.6 GB/s: 11 of the 15 ms an export of a 2,000-token stream of
// 4 KB per token took, as much again on its import (BenchmarkHostRoundTrip,
// synth qwen3 small, 2 AMD Zen 3 cores), on the path of every host-tier
// move. park/lossy.go computes the same.
uint64_t block_checksum(const uint8_t *p, size_t n) {
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "block_checksum reads words as little-endian");
    uint64_t lane[4] = {checksum_basis, checksum_basis ^ 1, checksum_basis ^ 2, checksum_basis ^ 3};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * (size_t)l, sizeof w);
            lane[l] = rotl29((lane[l] ^ w) * checksum_prime);
        }
    }
    for (; i < n; i++) {
        lane[0] = (lane[0] ^ p[i]) * checksum_prime;
    }
    uint64_t h = (uint64_t)n;
    for (uint64_t v : lane) {
        h = rotl29((h ^ v) * checksum_prime);
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

// Checks a blob's header (magic, version, model, KV type, length, checksum)
// and returns its payload in *body; op names the caller in the message.
int check_blob(sf_engine *e, const uint8_t *data, size_t len, const char magic[4], const char *op,
               sf_state_header *h) {
    if (data == nullptr || len < sizeof *h) {
        return sf_fail(e, SF_ERR_STATE, "%s: %zu bytes are too few for a state header", op, len);
    }
    memcpy(h, data, sizeof *h);
    if (memcmp(h->magic, magic, 4) != 0 || (h->version != SF_STATE_VERSION && h->version != SF_STATE_VERSION_FNV)) {
        return sf_fail(e, SF_ERR_STATE, "%s: not superfluid %s (bad magic or version)", op,
                       magic == SF_MAGIC_CKPT ? "checkpoint" : magic == SF_MAGIC_TAIL ? "KV tail" : "KV state");
    }
    if (memcmp(h->model_id, e->model_id, sizeof h->model_id) != 0) {
        return sf_fail(e, SF_ERR_STATE, "%s: the state belongs to another model", op);
    }
    if (h->kv_type != e->kv_type) {
        return sf_fail(e, SF_ERR_STATE, "%s: the state has KV type %d, the engine %d", op, h->kv_type, e->kv_type);
    }
    if (h->payload_len != len - sizeof *h) {
        return sf_fail(e, SF_ERR_STATE, "%s: header says %llu payload bytes, %zu present", op,
                       (unsigned long long)h->payload_len, len - sizeof *h);
    }
    const uint8_t *payload = data + sizeof *h;
    uint64_t sum = h->version == SF_STATE_VERSION_FNV ? fnv1a(payload, (size_t)h->payload_len)
                                                      : block_checksum(payload, (size_t)h->payload_len);
    if (sum != h->checksum) {
        return sf_fail(e, SF_ERR_STATE, "%s: checksum mismatch", op);
    }
    if (h->n_tokens > (uint32_t)e->n_ctx) {
        return sf_fail(e, SF_ERR_CONTEXT, "%s: %u tokens exceed the context of %d", op, h->n_tokens, e->n_ctx);
    }
    return SF_OK;
}

void fill_header(const sf_engine *e, uint8_t *out, const char magic[4], uint32_t n_tokens, size_t payload) {
    sf_state_header h{};
    memcpy(h.magic, magic, 4);
    h.version = SF_STATE_VERSION;
    memcpy(h.model_id, e->model_id, sizeof h.model_id);
    h.kv_type = e->kv_type;
    h.n_tokens = n_tokens;
    h.payload_len = payload;
    h.checksum = block_checksum(out + sizeof h, payload);
    memcpy(out, &h, sizeof h);
}

// Tails pass through the scratch sequence, whose cells are those of a
// full-attention sequence alone: a sliding-window or recurrent model's
// partial state has no tail to take apart.
int check_tails(sf_engine *e, const char *op) {
    if (e->scratch_seq < 0 || e->partial != SF_PARTIAL_NONE || e->mem == nullptr) {
        return sf_fail(e, SF_ERR_INVALID, "%s: this engine keeps no tail state (a full-attention model's only)", op);
    }
    return SF_OK;
}

// Empties the scratch sequence when it goes out of scope, whichever way
// the operation using it ends.
struct scratch_guard {
    sf_engine *e;
    ~scratch_guard() { llama_memory_seq_rm(e->mem, e->scratch_seq, -1, -1); }
};

void drop_ckpts_from(sf_engine *e, int32_t seq, int32_t pos) {
    auto &v = e->ckpts[(size_t)seq];
    while (!v.empty() && v.back().pos > pos) {
        v.pop_back();
    }
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
    // A copy shares the source's recurrent cell but not its pending
    // rollback: settle it first (rollback.cpp).
    if (int rc = sf_rollback_settle(e, src, "copy")) {
        return rc;
    }
    llama_memory_seq_rm(e->mem, dst, -1, -1);
    e->ckpts[(size_t)dst].clear();
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
    if (sf_rollback_cut_refused(e, seq, n_keep) || !llama_memory_seq_rm(e->mem, seq, n_keep, -1)) {
        return sf_fail(e, SF_ERR_UNSUPPORTED, "truncate: this model's memory cannot be cut at %d", n_keep);
    }
    drop_ckpts_from(e, seq, n_keep);
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
    e->ckpts[(size_t)seq].clear();
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
    fill_header(e, out, SF_MAGIC_STATE, (uint32_t)sf_seq_length_impl(e, seq), wrote);
    *needed = sizeof(sf_state_header) + wrote;
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
    if (int rc = check_blob(e, data, len, SF_MAGIC_STATE, "import", &h)) {
        return rc;
    }
    const uint8_t *body = data + sizeof h;
    llama_memory_seq_rm(e->mem, seq, -1, -1);
    e->ckpts[(size_t)seq].clear();
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

// The scratch sequence is given the tail's cells besides seq (unified
// cells: no copy of their data) and exported alone, so that an edit's
// hand-over copies out only what it cuts, not the prefix it keeps.
static int sf_seq_export_tail_impl(sf_engine *e, int32_t seq, int32_t from, uint8_t *out, size_t cap,
                                   size_t *needed) {
    if (e == nullptr || needed == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_seq(e, seq, "export tail")) {
        return rc;
    }
    if (int rc = check_tails(e, "export tail")) {
        return rc;
    }
    int32_t len = sf_seq_length_impl(e, seq);
    if (from < 1 || from >= len) {
        return sf_fail(e, SF_ERR_INVALID, "export tail: a tail from %d of a sequence holding %d tokens", from, len);
    }
    scratch_guard g{e};
    llama_memory_seq_rm(e->mem, e->scratch_seq, -1, -1);
    llama_memory_seq_cp(e->mem, seq, e->scratch_seq, from, -1);
    const uint32_t start = (uint32_t)from;
    size_t payload = sizeof start + llama_state_seq_get_size(e->ctx, e->scratch_seq);
    *needed = sizeof(sf_state_header) + payload;
    if (out == nullptr || cap < *needed) {
        return sf_fail(e, SF_ERR_BUFFER, "export tail: needs %zu bytes, has %zu", *needed, cap);
    }
    uint8_t *body = out + sizeof(sf_state_header);
    memcpy(body, &start, sizeof start);
    size_t wrote = llama_state_seq_get_data(e->ctx, body + sizeof start, payload - sizeof start, e->scratch_seq);
    if (wrote == 0 || wrote > payload - sizeof start) {
        return sf_fail(e, SF_ERR_STATE, "export tail: llama.cpp wrote %zu of %zu bytes", wrote, payload - sizeof start);
    }
    fill_header(e, out, SF_MAGIC_TAIL, (uint32_t)len, sizeof start + wrote);
    *needed = sizeof(sf_state_header) + sizeof start + wrote;
    return SF_OK;
}

// llama.cpp empties the sequence it restores state into: the tail lands in
// the scratch sequence and is then given to seq.
static int sf_seq_import_tail_impl(sf_engine *e, int32_t seq, const uint8_t *data, size_t len, int32_t *n_tokens) {
    if (e == nullptr || n_tokens == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_idle(e, seq, "import tail")) {
        return rc;
    }
    if (int rc = check_tails(e, "import tail")) {
        return rc;
    }
    sf_state_header h{};
    if (int rc = check_blob(e, data, len, SF_MAGIC_TAIL, "import tail", &h)) {
        return rc;
    }
    uint32_t start = 0;
    if (h.payload_len < sizeof start) {
        return sf_fail(e, SF_ERR_STATE, "import tail: %llu payload bytes hold no start",
                       (unsigned long long)h.payload_len);
    }
    memcpy(&start, data + sizeof h, sizeof start);
    int32_t have = sf_seq_length_impl(e, seq);
    if (start == 0 || start >= h.n_tokens || (int64_t)start != (int64_t)have) {
        return sf_fail(e, SF_ERR_STATE, "import tail: a tail of [%u, %u) onto sequence %d holding %d tokens", start,
                       h.n_tokens, seq, have);
    }
    scratch_guard g{e};
    llama_memory_seq_rm(e->mem, e->scratch_seq, -1, -1);
    const uint8_t *state = data + sizeof h + sizeof start;
    size_t read = llama_state_seq_set_data(e->ctx, state, (size_t)h.payload_len - sizeof start, e->scratch_seq);
    if (read == 0 || llama_memory_seq_pos_min(e->mem, e->scratch_seq) != (llama_pos)start ||
        llama_memory_seq_pos_max(e->mem, e->scratch_seq) + 1 != (llama_pos)h.n_tokens) {
        return sf_fail(e, SF_ERR_STATE, "import tail: llama.cpp refused the tail (see debug log)");
    }
    llama_memory_seq_cp(e->mem, e->scratch_seq, seq, -1, -1);
    *n_tokens = sf_seq_length_impl(e, seq);
    if (*n_tokens != (int32_t)h.n_tokens) {
        llama_memory_seq_rm(e->mem, seq, (llama_pos)start, -1);
        return sf_fail(e, SF_ERR_STATE, "import tail: sequence %d holds %d tokens, the header says %u", seq,
                       *n_tokens, h.n_tokens);
    }
    return SF_OK;
}

static int32_t sf_seq_min_cut_impl(const sf_engine *e, int32_t seq) {
    int32_t len = sf_seq_length_impl(e, seq);
    if (len <= 0 || e->partial == SF_PARTIAL_NONE) {
        return len < 0 ? -1 : 0;
    }
    if (e->partial == SF_PARTIAL_RECURRENT) {
        return len;
    }
    // A sliding-window layer's token at p reads the cells of the last
    // n_swa positions; llama.cpp reuses cells that left every window, so
    // a cut at p keeps its window only if the cells from pos_min on still
    // cover [p - n_swa, p) (llama-server: pos_min > max(0, n_past - n_swa)
    // forces a re-process).
    llama_pos pos_min = llama_memory_seq_pos_min(e->mem, seq);
    if (pos_min <= 0) {
        return 0;
    }
    // Above len: even the sequence's end has lost part of its window (a
    // copy or cut made without this test); it cannot be continued.
    return pos_min + e->n_swa;
}

// The spacing and the bound are measured: see SF_CKPT_EVERY (internal.h).
void sf_ckpt_after_prefill(sf_engine *e, const sf_lane *l, bool completes) {
    if (e->partial == SF_PARTIAL_NONE) {
        return;
    }
    auto &v = e->ckpts[(size_t)l->seq];
    int32_t pos = (int32_t)l->prefilled;
    int32_t last = v.empty() ? 0 : v.back().pos;
    const bool tail = e->partial == SF_PARTIAL_RECURRENT && (size_t)pos + SF_CKPT_TAIL == l->prompt.size();
    if (pos <= last || (!completes && !tail && pos < last + SF_CKPT_EVERY)) {
        return;
    }
    const llama_state_seq_flags flags = LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY;
    size_t payload = llama_state_seq_get_size_ext(e->ctx, l->seq, flags);
    if (payload == 0) {
        return;
    }
    sf_ckpt c;
    c.pos = pos;
    c.blob.resize(sizeof(sf_state_header) + payload);
    size_t wrote = llama_state_seq_get_data_ext(e->ctx, c.blob.data() + sizeof(sf_state_header), payload, l->seq, flags);
    if (wrote == 0 || wrote > payload) {
        return;  // no checkpoint: a later divergence falls back further
    }
    c.blob.resize(sizeof(sf_state_header) + wrote);
    fill_header(e, c.blob.data(), SF_MAGIC_CKPT, (uint32_t)pos, wrote);
    if ((int32_t)v.size() >= SF_CKPT_MAX) {
        v.erase(v.begin());  // the oldest: divergences cluster near a stream's end
    }
    v.push_back(std::move(c));
}

static int sf_seq_checkpoints_impl(sf_engine *e, int32_t seq, int32_t *pos, int32_t cap, int32_t *n) {
    if (e == nullptr || n == nullptr || cap < 0 || (pos == nullptr && cap > 0)) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_seq(e, seq, "checkpoints")) {
        return rc;
    }
    const auto &v = e->ckpts[(size_t)seq];
    *n = (int32_t)v.size();
    for (int32_t i = 0; i < cap && i < *n; i++) {
        pos[i] = v[(size_t)i].pos;
    }
    return SF_OK;
}

static int sf_seq_checkpoint_get_impl(sf_engine *e, int32_t seq, int32_t i, uint8_t *out, size_t cap,
                                      size_t *needed) {
    if (e == nullptr || needed == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_seq(e, seq, "checkpoint")) {
        return rc;
    }
    const auto &v = e->ckpts[(size_t)seq];
    if (i < 0 || (size_t)i >= v.size()) {
        return sf_fail(e, SF_ERR_INVALID, "checkpoint: %d of %zu", i, v.size());
    }
    const auto &b = v[(size_t)i].blob;
    *needed = b.size();
    if (out == nullptr || cap < b.size()) {
        return sf_fail(e, SF_ERR_BUFFER, "checkpoint: needs %zu bytes, has %zu", b.size(), cap);
    }
    memcpy(out, b.data(), b.size());
    return SF_OK;
}

static int sf_seq_restore_checkpoint_impl(sf_engine *e, int32_t seq, int32_t n_keep, const uint8_t *data,
                                          size_t len) {
    if (e == nullptr) {
        return SF_ERR_INVALID;
    }
    if (int rc = check_idle(e, seq, "restore checkpoint")) {
        return rc;
    }
    sf_state_header h{};
    if (int rc = check_blob(e, data, len, SF_MAGIC_CKPT, "restore checkpoint", &h)) {
        return rc;
    }
    // The length is not checked before: a sliding-window model's length
    // is its window's, which a copy of n_keep tokens may not hold yet.
    if (n_keep <= 0 || (uint32_t)n_keep != h.n_tokens) {
        return sf_fail(e, SF_ERR_INVALID, "restore checkpoint: a checkpoint at %u, keeping %d", h.n_tokens, n_keep);
    }
    // The partial state first: it replaces the sequence's own (the
    // recurrent state at the stream's end, the sliding-window cells), after
    // which the recurrent part holds nothing past n_keep and the cut below
    // only has full-attention cells left to drop.
    const auto fail = [&](const char *why) {
        llama_memory_seq_rm(e->mem, seq, -1, -1);
        e->ckpts[(size_t)seq].clear();
        return sf_fail(e, SF_ERR_STATE, "restore checkpoint at %d: %s", n_keep, why);
    };
    size_t read = llama_state_seq_set_data_ext(e->ctx, data + sizeof h, (size_t)h.payload_len, seq,
                                               LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    if (read == 0) {
        return fail("llama.cpp refused the state (see debug log)");
    }
    if (!llama_memory_seq_rm(e->mem, seq, n_keep, -1)) {
        return fail("the memory cannot be cut there");
    }
    drop_ckpts_from(e, seq, n_keep);
    if (sf_seq_length_impl(e, seq) != n_keep || sf_seq_min_cut_impl(e, seq) > n_keep) {
        return fail("the restored state does not end there");
    }
    return SF_OK;
}

// The ABI: each call inside the exception guard.
int32_t sf_seq_min_cut(const sf_engine *e, int32_t seq) {
    return sf_guard([&] { return sf_seq_min_cut_impl(e, seq); }, [](const char *) { return (int32_t)-1; });
}

int sf_seq_checkpoints(sf_engine *e, int32_t seq, int32_t *pos, int32_t cap, int32_t *n) {
    return sf_guard([&] { return sf_seq_checkpoints_impl(e, seq, pos, cap, n); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "checkpoints: %s", msg); });
}

int sf_seq_checkpoint_get(sf_engine *e, int32_t seq, int32_t i, uint8_t *out, size_t cap, size_t *needed) {
    return sf_guard([&] { return sf_seq_checkpoint_get_impl(e, seq, i, out, cap, needed); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "checkpoint: %s", msg); });
}

int sf_seq_checkpoints_clear(sf_engine *e, int32_t seq) {
    return sf_guard(
        [&] {
            if (e == nullptr) {
                return (int)SF_ERR_INVALID;
            }
            if (int rc = check_seq(e, seq, "checkpoints clear")) {
                return rc;
            }
            e->ckpts[(size_t)seq].clear();
            return (int)SF_OK;
        },
        [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "checkpoints clear: %s", msg); });
}

int sf_seq_restore_checkpoint(sf_engine *e, int32_t seq, int32_t n_keep, const uint8_t *data, size_t len) {
    return sf_guard([&] { return sf_seq_restore_checkpoint_impl(e, seq, n_keep, data, len); },
                    [&](const char *msg) {
                        if (e != nullptr && seq >= 0 && seq < e->n_seq_max) {
                            llama_memory_seq_rm(e->mem, seq, -1, -1);
                        }
                        return sf_fail(e, SF_ERR_EXCEPTION, "restore checkpoint: %s", msg);
                    });
}
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

int sf_seq_export_tail(sf_engine *e, int32_t seq, int32_t from, uint8_t *out, size_t cap, size_t *needed) {
    return sf_guard([&] { return sf_seq_export_tail_impl(e, seq, from, out, cap, needed); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "seq export tail: %s", msg); });
}

int sf_seq_import_tail(sf_engine *e, int32_t seq, const uint8_t *data, size_t len, int32_t *n_tokens) {
    return sf_guard([&] { return sf_seq_import_tail_impl(e, seq, data, len, n_tokens); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "seq import tail: %s", msg); });
}

int sf_seq_import(sf_engine *e, int32_t seq, const uint8_t *data, size_t len, int32_t *n_tokens) {
    return sf_guard([&] { return sf_seq_import_impl(e, seq, data, len, n_tokens); },
                    [&](const char *msg) { return sf_fail(e, SF_ERR_EXCEPTION, "seq import: %s", msg); });
}
