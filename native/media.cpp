// media.cpp — images and audio through llama.cpp's mtmd: a projector
// loaded beside the engine's model, prompts with media markers tokenized
// into chunks, and media chunks encoded into embedding rows (superfluid.h,
// "Media").
//
// mtmd reports its failures by logging them and returning null or a
// non-zero code, so each call here captures the error lines mtmd logs
// while it runs (a thread-local buffer: tokenize may run on several
// threads) and returns them as the call's message.
#include <cstring>
#include <memory>
#include <vector>

#include "internal.h"

#if SF_LLAMA_UPSTREAM
#include "mtmd-helper.h"
#include "mtmd.h"

namespace {

thread_local std::string *g_capture = nullptr;

void media_log(enum ggml_log_level level, const char *text, void *) {
    if (text == nullptr) {
        return;
    }
    if (g_capture != nullptr && (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_CONT) &&
        g_capture->size() < 512) {
        *g_capture += text;
    }
    sf_log_forward(level, text);
}

// Captures mtmd's error lines for the scope.
struct capture_errors {
    std::string text;
    capture_errors() { g_capture = &text; }
    ~capture_errors() { g_capture = nullptr; }
    capture_errors(const capture_errors &) = delete;
    capture_errors &operator=(const capture_errors &) = delete;
    // The captured lines, trimmed, or fallback when mtmd logged none.
    const char *say(const char *fallback) {
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
            text.pop_back();
        }
        return text.empty() ? fallback : text.c_str();
    }
};

std::once_flag g_log_once;

// is_audio is the helper's own test (mtmd-helper.cpp, is_audio_file),
// which decides whether a buffer is decoded as audio.
bool is_audio(const uint8_t *b, size_t n) {
    if (n < 12) {
        return false;
    }
    bool wav = memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WAVE", 4) == 0;
    bool mp3 = memcmp(b, "ID3", 3) == 0 || (b[0] == 0xFF && (b[1] & 0xE0) == 0xE0);
    return wav || mp3 || memcmp(b, "fLaC", 4) == 0;
}

}  // namespace

struct sf_media {
    sf_engine *engine = nullptr;
    mtmd_context *ctx = nullptr;
    int32_t n_embd = 0;
    int32_t window_rows = 0;  // rows of one audio window (0 without audio)
    // Why the audio encoder is not used ("" when it is or there is none).
    std::string audio_refused;
    ~sf_media() { mtmd_free(ctx); }
    bool hears() const { return audio_refused.empty() && mtmd_support_audio(ctx); }
};

// audio_window_rows tokenizes a second of silence: mtmd pads audio to whole
// 30-second windows, so its one audio chunk is a window's rows.
static int32_t audio_window_rows(mtmd_context *ctx) {
    int rate = mtmd_get_audio_sample_rate(ctx);
    if (rate <= 0) {
        return 0;
    }
    std::vector<float> silence((size_t)rate, 0.0f);
    // Owned so that nothing leaks if mtmd throws (the ABI guard catches it).
    std::unique_ptr<mtmd_bitmap, void (*)(mtmd_bitmap *)> bm(
        mtmd_bitmap_init_from_audio(silence.size(), silence.data()), mtmd_bitmap_free);
    std::unique_ptr<mtmd_input_chunks, void (*)(mtmd_input_chunks *)> chunks(mtmd_input_chunks_init(),
                                                                              mtmd_input_chunks_free);
    mtmd_input_text in{mtmd_default_marker(), strlen(mtmd_default_marker()), false, true};
    const mtmd_bitmap *bms[] = {bm.get()};
    if (mtmd_tokenize(ctx, chunks.get(), &in, bms, 1) != 0) {
        return 0;
    }
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks.get()); i++) {
        const mtmd_input_chunk *c = mtmd_input_chunks_get(chunks.get(), i);
        if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_AUDIO) {
            return (int32_t)mtmd_input_chunk_get_n_tokens(c);
        }
    }
    return 0;
}

struct sf_media_prompt {
    mtmd_input_chunks *chunks = nullptr;
    // Each chunk's index among its file's chunks (0 for text).
    std::vector<uint32_t> segments;
    ~sf_media_prompt() { mtmd_input_chunks_free(chunks); }
};

static int media_open(sf_engine *e, const char *path, int32_t n_threads, sf_media **out, char *err, int32_t err_cap) {
    std::call_once(g_log_once, [] { mtmd_helper_log_set(media_log, nullptr); });
    capture_errors cap;
    mtmd_context_params params = mtmd_context_params_default();
    params.use_gpu = false;
    params.print_timings = false;
    params.n_threads = n_threads > 0 ? n_threads : 1;
    params.warmup = false;
    mtmd_context *ctx = mtmd_init_from_file(path, e->model, params);
    if (ctx == nullptr) {
        sf_set_err(err, err_cap, "media", cap.say("cannot load the projector"));
        return SF_ERR_MODEL;
    }
    auto m = std::make_unique<sf_media>();
    m->engine = e;
    m->ctx = ctx;
    m->n_embd = llama_model_n_embd_inp(e->model);
    if (!mtmd_support_vision(ctx) && !mtmd_support_audio(ctx)) {
        sf_set_err(err, err_cap, "media", "the projector has neither a vision nor an audio encoder");
        return SF_ERR_UNSUPPORTED;
    }
    if (mtmd_decode_use_mrope(ctx)) {
        sf_set_err(err, err_cap, "media", "the projector needs M-RoPE positions, which this engine does not feed");
        return SF_ERR_UNSUPPORTED;
    }
    if (mtmd_support_audio(ctx)) {
        // Decided from the file before any audio reaches mtmd: the probe
        // below tokenizes, which for a stack factor under 1 asserts.
        sf_audio_window w = sf_audio_window_check(path);
        if (w.refusal.empty() && (m->window_rows = audio_window_rows(ctx)) <= 0) {
            sf_set_err(err, err_cap, "media", cap.say("the projector's audio encoder does not tokenize a second of silence"));
            return SF_ERR_UNSUPPORTED;
        }
        if (w.refusal.empty() && w.checked && w.counted != m->window_rows) {
            // mtmd's own count is not the mirrored one: media_window.cpp
            // no longer matches this llama.cpp, so its verdict is unknown.
            char why[200];
            snprintf(why, sizeof why, "mtmd counts a window as %d rows where superfluid's mirror of it (media_window.cpp) counts %lld: re-check the mirror against this llama.cpp",
                     m->window_rows, (long long)w.counted);
            w.refusal = why;
        }
        if (!w.refusal.empty()) {
            m->audio_refused = "mtmd cannot encode this projector's audio: " + w.refusal;
            m->window_rows = 0;
            sf_log_forward(GGML_LOG_LEVEL_WARN, (m->audio_refused + "; its audio is refused\n").c_str());
        }
    }
    *out = m.release();
    return SF_OK;
}

int sf_media_open(sf_engine *e, const char *path, int32_t n_threads, sf_media **out, char *err, int32_t err_cap) {
    if (e == nullptr || e->model == nullptr || path == nullptr || out == nullptr) {
        sf_set_err(err, err_cap, "media", "open: a null argument");
        return SF_ERR_INVALID;
    }
    *out = nullptr;
    return sf_guard([&] { return media_open(e, path, n_threads, out, err, err_cap); },
                    [&](const char *msg) {
                        sf_set_err(err, err_cap, "media", msg);
                        return (int)SF_ERR_EXCEPTION;
                    });
}

void sf_media_close(sf_media *m) {
    sf_guard([&] { delete m; return 0; }, [](const char *) { return 0; });
}

int32_t sf_media_n_embd(const sf_media *m) { return m == nullptr ? 0 : m->n_embd; }

const char *sf_media_marker(const sf_media *m) {
    return m == nullptr ? mtmd_default_marker() : mtmd_get_marker(m->ctx);
}

// The bitmaps of one call, freed together.
struct bitmaps {
    std::vector<mtmd_bitmap *> v;
    bitmaps() = default;
    bitmaps(const bitmaps &) = delete;
    bitmaps &operator=(const bitmaps &) = delete;
    ~bitmaps() {
        for (mtmd_bitmap *b : v) {
            mtmd_bitmap_free(b);
        }
    }
};

int32_t sf_media_modalities(const sf_media *m) {
    if (m == nullptr) {
        return 0;
    }
    return (mtmd_support_vision(m->ctx) ? SF_MEDIA_VISION : 0) | (m->hears() ? SF_MEDIA_HEARING : 0);
}

const char *sf_media_audio_refused(const sf_media *m) { return m == nullptr ? "" : m->audio_refused.c_str(); }

int32_t sf_media_audio_window_rows(const sf_media *m) { return m == nullptr ? 0 : m->window_rows; }

int32_t sf_media_audio_rate(const sf_media *m) {
    if (m == nullptr || !m->hears()) {
        return 0;
    }
    return mtmd_get_audio_sample_rate(m->ctx);
}

// segments numbers each media chunk among its file's chunks. mtmd gives
// every chunk of one file (an audio's 30-second windows) the file's id, and
// emits the files' chunks in order; a file's chunk count depends on its
// bytes alone, so a run of r consecutive files with one id yields a run of
// chunks with that id whose length is r times each file's count.
static bool segments(const mtmd_input_chunks *chunks, const bitmaps &bms, std::vector<uint32_t> &out) {
    size_t n = mtmd_input_chunks_size(chunks);
    out.assign(n, 0);
    std::vector<size_t> media;  // the media chunks' indices
    for (size_t i = 0; i < n; i++) {
        if (mtmd_input_chunk_get_type(mtmd_input_chunks_get(chunks, i)) != MTMD_INPUT_CHUNK_TYPE_TEXT) {
            media.push_back(i);
        }
    }
    auto chunk_id = [&](size_t k) {
        const char *id = mtmd_input_chunk_get_id(mtmd_input_chunks_get(chunks, media[k]));
        return std::string(id == nullptr ? "" : id);
    };
    auto file_id = [&](size_t b) {
        const char *id = mtmd_bitmap_get_id(bms.v[b]);
        return std::string(id == nullptr ? "" : id);
    };
    size_t k = 0, b = 0;
    while (k < media.size()) {
        if (b >= bms.v.size()) {
            return false;
        }
        std::string id = file_id(b);
        size_t files = 0, run = 0;
        while (b < bms.v.size() && file_id(b) == id) {
            b++, files++;
        }
        while (k + run < media.size() && chunk_id(k + run) == id) {
            run++;
        }
        if (run == 0 || run % files != 0) {
            return false;
        }
        size_t per = run / files;
        for (size_t j = 0; j < run; j++) {
            out[media[k + j]] = (uint32_t)(j % per);
        }
        k += run;
    }
    return true;
}

static int media_tokenize(sf_media *m, const char *text, const uint8_t *const *files, const size_t *lens,
                          uint32_t n_images, int32_t add_special, sf_media_prompt **out, char *err, int32_t err_cap) {
    capture_errors cap;
    bitmaps bms;
    for (uint32_t i = 0; i < n_images; i++) {
        if (files[i] == nullptr || lens[i] == 0) {
            char msg[96];
            snprintf(msg, sizeof msg, "media file %u is empty", i);
            sf_set_err(err, err_cap, "media", msg);
            return SF_ERR_INVALID;
        }
        // The helper tells audio (WAV, MP3, FLAC) from images by their
        // magic bytes, decodes images with stb_image and audio with
        // miniaudio (mono, at the audio encoder's rate), and sets the
        // bitmap's id to the SHA-256 of the file's bytes. Asked to decode
        // audio without an audio encoder it fails, so that is said first.
        if (is_audio(files[i], lens[i]) && !m->hears()) {
            char msg[512];
            snprintf(msg, sizeof msg, "media file %u is audio and the projector has no audio encoder%s%s", i,
                     m->audio_refused.empty() ? "" : " it can use: ", m->audio_refused.c_str());
            sf_set_err(err, err_cap, "media", msg);
            return SF_ERR_UNSUPPORTED;
        }
        mtmd_helper_bitmap_wrapper w =
            mtmd_helper_bitmap_init_from_buf(m->ctx, files[i], lens[i], false, mtmd_helper_init_opt_default());
        if (w.bitmap == nullptr) {
            char msg[600];
            snprintf(msg, sizeof msg, "media file %u does not decode: %s", i, cap.say("neither an image stb_image reads nor audio miniaudio reads"));
            sf_set_err(err, err_cap, "media", msg);
            return SF_ERR_INVALID;
        }
        bms.v.push_back(w.bitmap);
        bool audio = mtmd_bitmap_is_audio(w.bitmap);
        if (audio && !m->hears()) {  // is_audio above mirrors the helper; this is mtmd's own word
            char msg[512];
            snprintf(msg, sizeof msg, "media file %u is audio and the projector has no audio encoder it can use: %s", i,
                     m->audio_refused.c_str());
            sf_set_err(err, err_cap, "media", msg);
            return SF_ERR_UNSUPPORTED;
        }
        if (!audio && !mtmd_support_vision(m->ctx)) {
            char msg[96];
            snprintf(msg, sizeof msg, "media file %u is an image and the projector has no vision encoder", i);
            sf_set_err(err, err_cap, "media", msg);
            return SF_ERR_UNSUPPORTED;
        }
        if (audio && mtmd_bitmap_get_nx(w.bitmap) < SF_MEDIA_MIN_SAMPLES) {
            char msg[128];
            snprintf(msg, sizeof msg, "audio file %u decodes to %u samples: at least %d are needed", i,
                     (unsigned)mtmd_bitmap_get_nx(w.bitmap), SF_MEDIA_MIN_SAMPLES);
            sf_set_err(err, err_cap, "media", msg);
            return SF_ERR_INVALID;
        }
    }
    auto p = std::make_unique<sf_media_prompt>();
    p->chunks = mtmd_input_chunks_init();
    mtmd_input_text in{text, strlen(text), add_special != 0, true};
    int32_t rc = mtmd_tokenize(m->ctx, p->chunks, &in, (const mtmd_bitmap *const *)bms.v.data(), bms.v.size());
    if (rc == 1) {
        sf_set_err(err, err_cap, "media", "the prompt's media markers do not match its images in number");
        return SF_ERR_INVALID;
    }
    if (rc != 0) {
        sf_set_err(err, err_cap, "media", cap.say("a media file could not be preprocessed"));
        return SF_ERR_INVALID;
    }
    if (!segments(p->chunks, bms, p->segments)) {
        sf_set_err(err, err_cap, "media", "the prompt's media chunks do not follow its files");
        return SF_ERR_INVALID;
    }
    *out = p.release();
    return SF_OK;
}

int sf_media_tokenize(sf_media *m, const char *text, const uint8_t *const *files, const size_t *lens,
                      uint32_t n_images, int32_t add_special, sf_media_prompt **out, char *err, int32_t err_cap) {
    if (m == nullptr || text == nullptr || out == nullptr || (n_images > 0 && (files == nullptr || lens == nullptr))) {
        sf_set_err(err, err_cap, "media", "tokenize: a null argument");
        return SF_ERR_INVALID;
    }
    *out = nullptr;
    return sf_guard([&] { return media_tokenize(m, text, files, lens, n_images, add_special, out, err, err_cap); },
                    [&](const char *msg) {
                        sf_set_err(err, err_cap, "media", msg);
                        return (int)SF_ERR_EXCEPTION;
                    });
}

uint32_t sf_media_prompt_n_chunks(const sf_media_prompt *p) {
    return p == nullptr ? 0 : (uint32_t)mtmd_input_chunks_size(p->chunks);
}

int sf_media_prompt_chunk(const sf_media_prompt *p, uint32_t i, sf_media_chunk *out, int32_t *tokens, uint32_t cap) {
    if (p == nullptr || out == nullptr || i >= mtmd_input_chunks_size(p->chunks)) {
        return SF_ERR_INVALID;
    }
    const mtmd_input_chunk *c = mtmd_input_chunks_get(p->chunks, i);
    *out = sf_media_chunk{};
    out->n_tokens = (uint32_t)mtmd_input_chunk_get_n_tokens(c);
    out->n_pos = (int32_t)mtmd_input_chunk_get_n_pos(c);
    switch (mtmd_input_chunk_get_type(c)) {
    case MTMD_INPUT_CHUNK_TYPE_TEXT: {
        out->kind = SF_MEDIA_TEXT;
        size_t n = 0;
        const llama_token *t = mtmd_input_chunk_get_tokens_text(c, &n);
        if (n > cap || (n > 0 && tokens == nullptr)) {
            return SF_ERR_BUFFER;
        }
        if (n > 0) {
            memcpy(tokens, t, n * sizeof(llama_token));
        }
        return SF_OK;
    }
    case MTMD_INPUT_CHUNK_TYPE_IMAGE:
        out->kind = SF_MEDIA_IMAGE;
        break;
    case MTMD_INPUT_CHUNK_TYPE_AUDIO:
        out->kind = SF_MEDIA_AUDIO;
        break;
    default:
        return SF_ERR_UNSUPPORTED;
    }
    if (const char *id = mtmd_input_chunk_get_id(c)) {
        snprintf(out->id, sizeof out->id, "%s", id);
    }
    out->segment = i < p->segments.size() ? p->segments[i] : 0;
    return SF_OK;
}

static int media_encode(sf_media *m, const sf_media_prompt *p, uint32_t i, float *out, size_t cap, char *err,
                        int32_t err_cap) {
    const mtmd_input_chunk *c = mtmd_input_chunks_get(p->chunks, i);
    if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
        sf_set_err(err, err_cap, "media", "encode: a text chunk");
        return SF_ERR_INVALID;
    }
    if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_AUDIO && !m->hears()) {
        sf_set_err(err, err_cap, "media", "encode: an audio chunk, and the projector's audio encoder is not used");
        return SF_ERR_UNSUPPORTED;
    }
    size_t need = mtmd_input_chunk_get_n_tokens(c) * (size_t)m->n_embd;
    if (cap < need) {
        sf_set_err(err, err_cap, "media", "encode: the output buffer is too small");
        return SF_ERR_BUFFER;
    }
    capture_errors capt;
    if (mtmd_encode_chunk(m->ctx, c) != 0) {
        sf_set_err(err, err_cap, "media", capt.say("the projector failed to encode the media chunk"));
        return SF_ERR_DECODE;
    }
    const float *embd = mtmd_get_output_embd(m->ctx);
    if (embd == nullptr) {
        sf_set_err(err, err_cap, "media", "encode: no output");
        return SF_ERR_DECODE;
    }
    memcpy(out, embd, need * sizeof(float));
    return SF_OK;
}

int sf_media_encode(sf_media *m, const sf_media_prompt *p, uint32_t i, float *out, size_t cap, char *err,
                    int32_t err_cap) {
    if (m == nullptr || p == nullptr || out == nullptr || i >= mtmd_input_chunks_size(p->chunks)) {
        sf_set_err(err, err_cap, "media", "encode: a null argument or a chunk out of range");
        return SF_ERR_INVALID;
    }
    return sf_guard([&] { return media_encode(m, p, i, out, cap, err, err_cap); },
                    [&](const char *msg) {
                        sf_set_err(err, err_cap, "media", msg);
                        return (int)SF_ERR_EXCEPTION;
                    });
}

void sf_media_prompt_free(sf_media_prompt *p) {
    sf_guard([&] { delete p; return 0; }, [](const char *) { return 0; });
}

#else  // the Go module's llama.cpp: no mtmd compiled in

int sf_media_open(sf_engine *, const char *, int32_t, sf_media **out, char *err, int32_t err_cap) {
    if (out != nullptr) {
        *out = nullptr;
    }
    sf_set_err(err, err_cap, "media", "this build has no mtmd (ENGINE=module): images and audio need the upstream engine");
    return SF_ERR_UNSUPPORTED;
}
void sf_media_close(sf_media *) {}
int32_t sf_media_n_embd(const sf_media *) { return 0; }
const char *sf_media_marker(const sf_media *) { return "<__media__>"; }
int32_t sf_media_modalities(const sf_media *) { return 0; }
int32_t sf_media_audio_rate(const sf_media *) { return 0; }
int32_t sf_media_audio_window_rows(const sf_media *) { return 0; }
const char *sf_media_audio_refused(const sf_media *) { return ""; }
int sf_media_tokenize(sf_media *, const char *, const uint8_t *const *, const size_t *, uint32_t, int32_t,
                      sf_media_prompt **out, char *err, int32_t err_cap) {
    if (out != nullptr) {
        *out = nullptr;
    }
    sf_set_err(err, err_cap, "media", "this build has no mtmd");
    return SF_ERR_UNSUPPORTED;
}
uint32_t sf_media_prompt_n_chunks(const sf_media_prompt *) { return 0; }
int sf_media_prompt_chunk(const sf_media_prompt *, uint32_t, sf_media_chunk *, int32_t *, uint32_t) {
    return SF_ERR_UNSUPPORTED;
}
int sf_media_encode(sf_media *, const sf_media_prompt *, uint32_t, float *, size_t, char *err, int32_t err_cap) {
    sf_set_err(err, err_cap, "media", "this build has no mtmd");
    return SF_ERR_UNSUPPORTED;
}
void sf_media_prompt_free(sf_media_prompt *) {}

#endif
