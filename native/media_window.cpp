// media_window.cpp — whether mtmd can encode an audio projector's
// 30-second windows, decided from the projector file's metadata before
// any audio reaches it.
//
// mtmd counts a window's rows with one formula (clip.cpp,
// clip_n_output_tokens) and builds the Whisper encoder's graph with
// another (models/whisper-enc.cpp, clip.cpp's build_vit and build_stack);
// clip_image_batch_encode GGML_ABORTs ("Invalid number of output tokens")
// when they differ, which for Ultravox's stack factor of 8 they do (187
// counted, 188 built), killing the process on every audio request. The
// two formulas are mirrored here, side by side, so a projector whose
// windows they disagree on has its audio refused at load.
//
// On a llama.cpp bump, re-check against the new tree:
//   - clip.cpp clip_n_output_tokens, the case of ULTRAVOX, VOXTRAL, QWEN2A,
//     MERALION, MUSIC_FLAMINGO, and that of GLMA (window_rows_counted);
//   - models/whisper-enc.cpp build() (two conv1d_ph, learned positions of
//     n_frames / 2, build_stack for audio_has_stack_frames, the GLMA
//     projector's build_stack and BOI/EOI rows), clip.cpp build_vit's
//     avg-pool for audio_has_avgpool, build_stack's padding (window_rows_built);
//   - clip-model.h audio_has_avgpool / audio_has_stack_frames;
//   - clip.cpp's builder dispatch: which types use clip_graph_whisper_enc;
//   - mtmd.cpp: those types use mtmd_audio_preprocessor_whisper, whose
//     windows (mtmd-audio.cpp, frames_per_chunk) are all exactly 3000 mel
//     frames — the last is padded with silence, a shorter tail is dropped;
//   - clip.cpp load_hparams: the projector-type keys and stack_factor key.
// The cgo test TestAudioWindowRowsMirror checks the counted formula
// against mtmd's own count and the built one against an encode.
#include <cstring>
#include <string>

#include "internal.h"

#if SF_LLAMA_UPSTREAM
// clip-impl.h is mtmd's internal header: its key names and projector-type
// table are what load_hparams reads. It defines helpers as static
// functions this file does not call.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "clip-impl.h"
#pragma GCC diagnostic pop

namespace {

// Every window of mtmd_audio_preprocessor_whisper (mtmd-audio.cpp).
constexpr int32_t kWhisperWindowFrames = 3000;

bool whisper_family(projector_type t) {
    switch (t) {
    case PROJECTOR_TYPE_ULTRAVOX:
    case PROJECTOR_TYPE_VOXTRAL:
    case PROJECTOR_TYPE_QWEN2A:
    case PROJECTOR_TYPE_MERALION:
    case PROJECTOR_TYPE_MUSIC_FLAMINGO:
    case PROJECTOR_TYPE_GLMA:
        return true;
    default:
        return false;
    }
}

// As clip-model.h's audio_has_stack_frames and audio_has_avgpool.
bool stacks_frames(projector_type t) {
    return t == PROJECTOR_TYPE_ULTRAVOX || t == PROJECTOR_TYPE_VOXTRAL || t == PROJECTOR_TYPE_MERALION;
}
bool avg_pools(projector_type t) {
    return t == PROJECTOR_TYPE_QWEN2A || t == PROJECTOR_TYPE_VOXTRAL || t == PROJECTOR_TYPE_MUSIC_FLAMINGO;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The rows clip_n_output_tokens counts for a window of n mel frames.
int64_t window_rows_counted(projector_type t, int64_t stack, int64_t n) {
    if (t == PROJECTOR_TYPE_GLMA) {
        return n / 2 / stack + 2;
    }
    int64_t rows = n;
    if (stacks_frames(t)) {
        rows = ceil_div(rows, stack);  // CLIP_ALIGN(n, stack) / stack
    }
    rows /= 2;
    if (avg_pools(t)) {
        rows /= 2;
    }
    return rows;
}

// A conv1d_ph's output length: padding kernel / 2, dilation 1 (ggml.c,
// ggml_calc_conv_output_size).
int64_t conv_ph_len(int64_t n, int64_t kernel, int64_t stride) {
    return (n + 2 * (kernel / 2) - (kernel - 1) - 1) / stride + 1;
}

// The rows the encoder graph makes of n frames (after its second
// convolution), or -1 where the graph itself would assert: the
// convolutions' output and the n / 2 learned positions added to it must
// agree, and the positions must exist.
int64_t window_rows_built(projector_type t, int64_t stack, int64_t n, int64_t kernel1, int64_t kernel2,
                          int64_t positions) {
    int64_t rows = conv_ph_len(conv_ph_len(n, kernel1, 1), kernel2, 2);
    if (rows != n / 2 || positions < n / 2) {
        return -1;
    }
    if (avg_pools(t)) {
        rows = (rows - 2) / 2 + 1;  // ggml_pool_1d, kernel 2, stride 2
    }
    if ((stacks_frames(t) || t == PROJECTOR_TYPE_GLMA) && stack > 1) {
        rows = ceil_div(rows, stack);  // build_stack pads to whole stacks
    }
    return t == PROJECTOR_TYPE_GLMA ? rows + 2 : rows;
}

}  // namespace

bool sf_audio_window_rows(const char *proj, int64_t stack, int64_t n_frames, int64_t kernel1, int64_t kernel2,
                          int64_t positions, int64_t *counted, int64_t *built) {
    projector_type t = clip_projector_type_from_string(proj);
    if (t == PROJECTOR_TYPE_QWEN25O) {
        t = PROJECTOR_TYPE_QWEN2A;  // load_hparams: the omni file's audio half
    }
    if (!whisper_family(t)) {
        return false;
    }
    bool needs_stack = stacks_frames(t) || t == PROJECTOR_TYPE_GLMA;
    // A stack under 1 asserts (or divides by zero) in the count itself.
    *counted = needs_stack && stack < 1 ? -1 : window_rows_counted(t, stack, n_frames);
    *built = window_rows_built(t, stack, n_frames, kernel1, kernel2, positions);
    return true;
}

sf_audio_window sf_audio_window_check(const char *path) {
    sf_audio_window w;
    ggml_context *meta = nullptr;
    gguf_init_params params{/*no_alloc=*/true, /*ctx=*/&meta};
    gguf_context *g = gguf_init_from_file(path, params);
    if (g == nullptr) {
        w.refusal = "its metadata does not read";
        return w;
    }
    auto str = [&](const char *key) -> std::string {
        int64_t k = gguf_find_key(g, key);
        return k >= 0 && gguf_get_kv_type(g, k) == GGUF_TYPE_STRING ? gguf_get_val_str(g, k) : "";
    };
    std::string proj = str(KEY_PROJ_TYPE);
    if (proj.empty()) {
        proj = str(KEY_AUDIO_PROJ_TYPE);
    }
    int64_t stack = 0;
    if (int64_t k = gguf_find_key(g, KEY_A_PROJ_STACK_FACTOR); k >= 0 && gguf_get_kv_type(g, k) == GGUF_TYPE_UINT32) {
        stack = gguf_get_val_u32(g, k);
    }
    auto dim = [&](const char *name, int d) -> int64_t {
        ggml_tensor *t = meta == nullptr ? nullptr : ggml_get_tensor(meta, name);
        return t == nullptr ? 0 : t->ne[d];
    };
    int64_t kernel1 = dim("a.conv1d.1.weight", 0), kernel2 = dim("a.conv1d.2.weight", 0);
    int64_t positions = dim("a.position_embd.weight", 1);
    gguf_free(g);
    ggml_free(meta);
    w.checked = sf_audio_window_rows(proj.c_str(), stack, kWhisperWindowFrames, kernel1, kernel2, positions,
                                     &w.counted, &w.built);
    if (!w.checked) {
        return w;
    }
    char why[256];
    if (w.counted < 0) {
        snprintf(why, sizeof why, "its %s encoder's stack factor is %lld, and mtmd's count of a window's rows needs one of at least 1",
                 proj.c_str(), (long long)stack);
        w.refusal = why;
    } else if (w.built < 0) {
        snprintf(why, sizeof why, "its %s encoder's convolutions (kernels %lld, %lld) or learned positions (%lld) do not fit a window of %d mel frames",
                 proj.c_str(), (long long)kernel1, (long long)kernel2, (long long)positions, kWhisperWindowFrames);
        w.refusal = why;
    } else if (w.counted != w.built) {
        snprintf(why, sizeof why, "its %s encoder stacks %lld frames a row, so mtmd counts a 30-second window as %lld rows while its graph makes %lld, and mtmd aborts on the difference",
                 proj.c_str(), (long long)stack, (long long)w.counted, (long long)w.built);
        w.refusal = why;
    }
    return w;
}

int sf_media_audio_window_rows_for(const char *proj, int32_t stack, int32_t n_frames, int32_t *counted,
                                   int32_t *built) {
    if (proj == nullptr || counted == nullptr || built == nullptr || n_frames < 1) {
        return 0;
    }
    int64_t c = 0, b = 0;
    // Whisper's kernels (3) and enough positions: the formulas alone.
    if (!sf_audio_window_rows(proj, stack, n_frames, 3, 3, n_frames, &c, &b)) {
        return 0;
    }
    *counted = (int32_t)c;
    *built = (int32_t)b;
    return 1;
}

#else  // no mtmd

int sf_media_audio_window_rows_for(const char *, int32_t, int32_t, int32_t *, int32_t *) { return 0; }

#endif
