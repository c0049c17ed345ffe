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
# A variant's code must not run before native/cpu_variant.cpp chose it: a
# static initializer in a v4 object would run AVX-512 code at start-up on
# any CPU. ggml's CPU backend has none; refuse a tree where that changed.
if nm "$@" | grep -q '_GLOBAL__sub_I'; then
	echo "rename-syms: $archive: static initializers in a CPU variant (would run before the variant is chosen):" >&2
	nm -A "$@" | grep '_GLOBAL__sub_I' >&2
	exit 1
fi
dir=$archive.objs
rm -rf "$dir" && mkdir -p "$dir"
# What the variant defines, and the signatures of its COMDAT groups: the
# linker keeps one group per signature across all objects, so a v3 inline
# constructor whose group kept the name it has in v2 would be discarded
# (leaving a call to address 0), or v2's body would serve v3.
{
	nm -g --defined-only "$@" | awk 'NF == 3 { print $3 }'
	readelf -gW "$@" | sed -n "s/^COMDAT group section .*\[\(.*\)\] contains.*/\1/p"
} | sort -u | awk -v p="$prefix" '{ print $1 " " p $1 }' >"$archive.syms"
renamed=()
for o in "$@"; do
	out=$dir/$(echo "${o#*/cpu-*/}" | tr / _)
	objcopy --redefine-syms="$archive.syms" "$o" "$out"
	renamed+=("$out")
done
ar rcs "$archive" "${renamed[@]}"
