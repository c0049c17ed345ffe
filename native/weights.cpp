// weights.cpp — where the loaded model's weights went: which backend
// buffer types hold them (the CPU backend's repacked copy among them).
#include <cstring>

#include "../src/llama-model.h"
#include "ggml-backend.h"
#include "internal.h"

// llama.h has no call that says where a tensor was placed, so this walks
// llama_model's tensor list (present in both API levels) and asks each
// tensor's buffer for its type's name.
int64_t sf_weight_bytes_in(const sf_engine *e, const char *buffer_type) {
    if (e == nullptr || e->model == nullptr || buffer_type == nullptr) {
        return 0;
    }
    return sf_guard(
        [&] {
            int64_t bytes = 0;
            for (const auto &named : e->model->tensors_by_name) {
                const ggml_tensor *t = named.second;
                if (t == nullptr || t->buffer == nullptr) {
                    continue;
                }
                const char *name = ggml_backend_buft_name(ggml_backend_buffer_get_type(t->buffer));
                if (name != nullptr && strcmp(name, buffer_type) == 0) {
                    bytes += (int64_t)ggml_nbytes(t);
                }
            }
            return bytes;
        },
        [](const char *) { return (int64_t)0; });
}
