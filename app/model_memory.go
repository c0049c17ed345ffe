package app

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"strconv"

	"superfluid/engine"
	"superfluid/gguf"
)

// A model's memory is what it holds once loaded: the weights, the KV pool
// of its context and the host tier's budget for its evicted conversations.
// Before a load only the file can be read, so the registry decides with an
// estimate from the GGUF header and replaces it with the measured size
// (the engine's own figures) once the model is loaded; a model loaded
// before is estimated by what it measured then.

// measuredSize is a loaded model's memory: llama.cpp's size of the loaded
// weights, the KV pool (the engine's bytes per token, times the context),
// the recurrent state, the multi-token prediction block's cache and the
// host cache budget.
func measuredSize(desc *engine.Descriptor, hostCache int64) int64 {
	return int64(desc.ModelBytes) + desc.KVBytesPerToken*int64(desc.Ctx) + desc.RecurrentStateBytes + desc.MTPBytes + max(hostCache, 0)
}

// estimatedSize is what the model at path would hold with o's context and
// KV cache types (an embedding model's as openEmbeddingStack opens it):
// the tensor bytes of the file, a KV pool of o.Ctx tokens ×
// estimatedKVBytesPerToken, and the host cache budget.
func estimatedSize(path string, o Options) (int64, error) {
	if isEmbeddingModel(path) { // its context is one call's batch, and it has no cache
		o.Ctx, o.HostCache = max(o.Batch, defaultEmbedBatch), 0
	}
	f, err := gguf.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	var weights int64
	for _, t := range f.Tensors {
		n, err := t.Bytes()
		if err != nil {
			return 0, fmt.Errorf("reading %s: tensor %s: %w", path, t.Name, err)
		}
		weights += int64(n)
	}
	kv := int64(o.Ctx) * estimatedKVBytesPerToken(f, o.CacheTypeK, o.CacheTypeV)
	return weights + kv + max(o.HostCache, 0), nil
}

// estimatedKVBytesPerToken is what one context token takes in the K and V
// caches of a model file, by its header: layers × KV heads × (K head size
// × K type's bytes + V head size × V type's bytes), as the engine's
// descriptor reckons it once loaded.
func estimatedKVBytesPerToken(f *gguf.File, typeK, typeV string) int64 {
	arch, _ := f.String("general.architecture")
	layers := ggufUint(f, arch+".block_count")
	heads := ggufUint(f, arch+".attention.head_count")
	kvHeads := cmp.Or(ggufUint(f, arch+".attention.head_count_kv"), heads)
	embd := ggufUint(f, arch+".embedding_length")
	var headK, headV uint64
	if heads > 0 {
		headK = cmp.Or(ggufUint(f, arch+".attention.key_length"), embd/heads)
		headV = cmp.Or(ggufUint(f, arch+".attention.value_length"), embd/heads)
	}
	row := func(values uint64, typ string) int64 {
		num, den := cacheTypeSize(typ)
		return int64(values) * num / den
	}
	return int64(layers) * (row(kvHeads*headK, typeK) + row(kvHeads*headV, typeV))
}

func ggufUint(f *gguf.File, key string) uint64 {
	if v, ok := f.Uint64(key); ok {
		return v
	}
	if v, ok := f.Uint32(key); ok {
		return uint64(v)
	}
	return 0
}

// cacheTypeSize is a KV cache type's bytes per block over its values per
// block, from ggml's type table; f16's where the name is not a type (the
// flags refuse such names before a model loads).
func cacheTypeSize(name string) (bytes, values int64) {
	t, ok := gguf.TypeByName(name)
	if !ok {
		t = gguf.F16
	}
	return int64(t.BlockBytes()), int64(t.BlockSize())
}

// budgetShare is the fraction of the memory available at start that
// loaded models may hold by default: the rest is left to the process's
// heap, the page cache and everything else on the machine.
const budgetShare = 0.8

// defaultMemoryBudget is budgetShare of MemAvailable (/proc/meminfo);
// 0 (no bound) where it cannot be read.
func defaultMemoryBudget() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) >= 2 && string(fields[0]) == "MemAvailable:" {
			kb, err := strconv.ParseInt(string(fields[1]), 10, 64)
			if err != nil {
				return 0
			}
			return int64(float64(kb<<10) * budgetShare)
		}
	}
	return 0
}
