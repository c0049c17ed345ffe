#!/usr/bin/env bash
# Builds superfluid with the Metal backend (macOS on Apple silicon, Xcode
# command-line tools installed).
#
# On darwin/arm64 the pinned ggml module package compiles Metal (and
# Accelerate BLAS) in itself, so no plugin is needed: the `metal` build tag
# only makes superfluid offload every layer by default. x86-64-v3 flags do
# not apply on arm64; SIMD= clears them.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(uname -s)/$(uname -m)" = "Darwin/arm64" ] || { echo "metal.sh: needs macOS on Apple silicon"; exit 1; }
# The Go module's ggml package is the one that compiles Metal in: the
# module engine (its Makefile warning applies).
make build ENGINE=module SIMD= GOFLAGS="-tags=metal,sfmodule"
echo "built bin/superfluid with Metal"
