// compute.cpp — the CPU threads llama.cpp computes on.
//
// Left to itself, ggml starts a threadpool for every graph it computes and
// joins it afterwards, so each step pays for starting threads and for
// waking an idle core. llama-bench and llama-cli attach a persistent pool
// instead, whose workers poll for the next graph a while before they sleep.
// Measured here (cgo BenchmarkThreadPool, 2 threads, rounds paired), one
// decode stream ran 1.00-1.07x as fast as with threads per graph, on both
// engines and both benchmark models; a pool whose threads sleep at once
// (poll 0) ran 0.84-1.05x, as waking them costs more than starting them.
//
// The pools are shared: one per (threads, poll) for the whole process, with
// a lock so that one graph computes on a pool at a time. A server's engines
// step one at a time anyway (the scheduler's arbiter); a pool per engine
// would leave an idle engine's workers polling on the cores the stepping
// engine needs. Pools live as long as the process.
#include <memory>

#include "ggml-backend.h"
#include "internal.h"

namespace {

std::mutex pools_mu;  // guards pools
std::vector<std::unique_ptr<sf_pool>> pools;

using threadpool_new_fn = ggml_threadpool *(*)(ggml_threadpool_params *);

// The CPU backend's ggml_threadpool_new, through its registry entry: in a
// multi-variant build the function is the chosen variant's.
threadpool_new_fn cpu_threadpool_new() {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (dev == nullptr) {
        return nullptr;
    }
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    return reg == nullptr ? nullptr : (threadpool_new_fn)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
}

}  // namespace

sf_pool *sf_pool_get(int32_t threads, int32_t poll) {
    std::lock_guard<std::mutex> g(pools_mu);
    for (const auto &p : pools) {
        if (p->threads == threads && p->poll == poll) {
            return p.get();
        }
    }
    threadpool_new_fn make = cpu_threadpool_new();
    if (make == nullptr) {
        return nullptr;  // ggml's own pool per graph
    }
    ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    tpp.poll = (uint32_t)poll;
    ggml_threadpool *tp = make(&tpp);
    if (tp == nullptr) {
        return nullptr;
    }
    pools.push_back(std::make_unique<sf_pool>());
    sf_pool *p = pools.back().get();
    p->tp = tp;
    p->threads = threads;
    p->poll = poll;
    return p;
}
