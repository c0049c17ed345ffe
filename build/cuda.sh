#!/usr/bin/env bash
# Builds superfluid with the CUDA backend (Linux, NVIDIA toolkit ≥ 12 installed:
# nvcc on PATH, cmake ≥ 3.21).
#
# ggml's CUDA backend is built from the same pinned module sources as the CPU
# build, as a ggml backend plugin (libggml-cuda.so, ollama's "CUDA 12" CMake
# preset), and installed beside the binary in lib/superfluid/. The `cuda`
# build tag makes superfluid load plugins from there (or $SUPERFLUID_LIB_DIR)
# at start and offload every layer by default. The binary stays dynamically
# linked: a static glibc binary cannot dlopen the plugin.
#
# Usage: build/cuda.sh [PRESET]     (PRESET defaults to "CUDA 12")
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-CUDA 12}
command -v nvcc >/dev/null || { echo "cuda.sh: nvcc not found (install the CUDA toolkit)"; exit 1; }
command -v cmake >/dev/null || { echo "cuda.sh: cmake not found"; exit 1; }

ollama_dir=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
work=.cache/cuda-build
rm -rf "$work" && mkdir -p "$work"
# The module cache is read-only; build from a copy.
cp -r "$ollama_dir"/. "$work/src" && chmod -R u+w "$work/src"
cmake -S "$work/src" -B "$work/out" --preset "$preset"
cmake --build "$work/out" --target ggml-cuda -j "$(nproc)"

mkdir -p lib/superfluid
find "$work/out" -name 'libggml-cuda*.so*' -exec cp -a {} lib/superfluid/ \;
# The plugin is built from the Go module's ggml, so the binary links that
# ggml too: the module engine (its Makefile warning applies).
make build ENGINE=module GOFLAGS="-tags=cuda,sfmodule"
echo "built bin/superfluid with CUDA; plugins in lib/superfluid/"
