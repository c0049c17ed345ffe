#!/usr/bin/env bash
# rename-syms.sh PREFIX ARCHIVE OBJECT... — archive the objects of one build
# of ggml's CPU backend, every global symbol they define renamed PREFIX+name
# (PREFIX "-": archive as they are).
#
# Several builds of the same sources (x86-64-v2, v3, v4) go into one static
# binary, so each must keep its symbols apart. objcopy --redefine-syms with
# the list of what the variant defines renames the definitions and the
# references between its own objects alike, and leaves its references to
# ggml-base (undefined here) alone; --prefix-symbols would rename those too.
# Weak symbols (inline functions, template instances) are renamed as well:
# otherwise the linker would keep one variant's copy for all of them, and a
# v4 (AVX-512) body could run on a v2 machine.
set -euo pipefail
prefix=$1 archive=$2
shift 2
rm -f "$archive"
if [ "$prefix" = "-" ]; then
	ar rcs "$archive" "$@"
	exit 0
fi
dir=$archive.d
rm -rf "$dir" && mkdir -p "$dir"
nm -g --defined-only "$@" | awk -v p="$prefix" 'NF == 3 { print $3 " " p $3 }' | sort -u >"$archive.syms"
renamed=()
for o in "$@"; do
	out=$dir/$(echo "$o" | tr / _)
	objcopy --redefine-syms="$archive.syms" "$o" "$out"
	renamed+=("$out")
done
ar rcs "$archive" "${renamed[@]}"
