// Package cgo binds the native engine (native/superfluid.h, llama.cpp inside)
// to Go and implements engine.Engine.
//
// One goroutine owns an *Engine: Tick, the sequence primitives and Close
// must be called from it (or under the owner's synchronisation). Yield,
// Descriptor and the text functions (Tokenize, AppendPiece, Detokenize,
// ApplyChatTemplate) may be called from any goroutine, also while or after
// the engine closes: Close waits for the text calls in flight, and later
// ones return engine.ErrClosed (or nothing, where they have no error).
// There is no finalizer.
package cgo

/*
#cgo CXXFLAGS: -std=c++17 -Wall -Wextra
#cgo CPPFLAGS: -I${SRCDIR}/../native
#cgo linux LDFLAGS: -lm
#include <stdlib.h>
#include "superfluid.h"
*/
import "C"

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"superfluid/engine"
	"superfluid/gguf"
)

// Options configure an engine.
type Options struct {
	ModelPath string
	Ctx       int // context tokens shared by all sequences; 0: the model's
	Seqs      int // engine sequences: lanes plus cached prefixes
	Lanes     int // lanes that may run at once
	Batch     int // most tokens a step may carry (n_batch); 0: DefaultBatch
	UBatch    int // micro-batch llama_decode splits a step into (n_ubatch); 0: min(Batch, DefaultUBatch)
	Threads   int // 0: all cores
	// CacheTypeK and CacheTypeV are the K and V caches' cell types, named
	// as llama.cpp's --cache-type-k/-v name them (CacheTypes); "" is f16.
	// q8_0 takes 34 bytes per 32 values against f16's 64.
	CacheTypeK string
	CacheTypeV string
	// FlashAttn is "on" (the default), "off" or "auto" (llama.cpp decides).
	// On the CPU its kernel skips masked KV cells, so a lane's attention
	// costs what its own cells cost; without it every lane attends over the
	// whole used span of the shared pool, which the prefix cache's resident
	// conversations fill — decode then slows as the cache grows. A
	// quantized V cache needs it: "auto" turns it on, "off" is refused.
	FlashAttn string
	NoMmap    bool
	// NoRepack keeps the weights in the file's layout instead of the CPU
	// backend's repacked copy (Q4_0, Q4_K, IQ4_NL in interleaved rows for
	// the AVX2 kernels; other types are never repacked on x86): less
	// memory and a load without the copy, slower matrix products (prefill
	// and batched decode). llama-server's --no-repack.
	NoRepack  bool
	GPULayers int // layers to offload in a GPU build: 0 all (default), <0 none
	// Poll is how long the CPU threads spin for the next step before they
	// sleep, 1 to 100 (llama.cpp's --poll); 0 means DefaultPoll. Engines
	// with the same Threads and Poll share one pool of threads and compute
	// one at a time. PollOff: threads that sleep at once; PollNone: no
	// pool, ggml starts threads for every step (as llama-server does).
	Poll int
	// LoRA are adapter files loaded with the model, in order: a plan's
	// LoRA scales name them by position (engine.Plan.LoRA).
	LoRA []string
	// MTP loads the model's multi-token prediction (NextN) layers and
	// opens a context on them, which NewMTPDrafter drafts from
	// (--spec-type draft-mtp); Open refuses it on a model without them.
	MTP bool
	// DraftMax is the longest draft a lane will carry (--spec-draft-n-max)
	// when the server speculates; 0: it does not. A recurrent or hybrid
	// model whose architecture llama.cpp rolls back then keeps that many
	// recurrent-state snapshots per sequence, so that it takes drafts
	// (Descriptor.Drafts, DraftMax; its RecurrentStateBytes grow by
	// DraftMax+1 times).
	DraftMax int
}

// DefaultUBatch is the micro-batch unless told otherwise: llama.cpp's and
// llama-server's default, at which the CPU's prefill rate levels off
// (BenchmarkPrefillUBatch).
const DefaultUBatch = 512

// DefaultPoll is llama.cpp's polling level. On this project's 2-core
// machine one decode stream ran 1.00-1.07x as fast with it as with ggml's
// threads per step, and never slower (BenchmarkThreadPool).
const DefaultPoll = 50

// Options.Poll's two settings below 1.
const (
	PollOff  = -1 // a pool whose threads sleep as soon as a step is done
	PollNone = -2 // no pool: threads started for every step
)

func (o *Options) withDefaults() Options {
	v := *o
	if v.Lanes <= 0 {
		v.Lanes = 4
	}
	if v.Seqs <= 0 {
		v.Seqs = 2 * v.Lanes
	}
	if v.Batch <= 0 {
		// Room for every lane's decode token and as much prompt beside.
		v.Batch = max(DefaultBatch, 2*v.Lanes)
	}
	if v.UBatch <= 0 {
		v.UBatch = min(v.Batch, DefaultUBatch)
	}
	if v.Threads <= 0 {
		v.Threads = runtime.NumCPU()
	}
	v.CacheTypeK = cmp.Or(v.CacheTypeK, "f16")
	v.CacheTypeV = cmp.Or(v.CacheTypeV, "f16")
	if v.FlashAttn == "" {
		v.FlashAttn = "on"
	}
	return v
}

// CacheTypes are the KV cache types an engine may hold, in llama.cpp's
// order (common/arg.cpp kv_cache_types).
var CacheTypes = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}

var cacheTypeIDs = map[string]C.int32_t{
	"f32": C.SF_KV_F32, "f16": C.SF_KV_F16, "bf16": C.SF_KV_BF16, "q8_0": C.SF_KV_Q8_0, "q4_0": C.SF_KV_Q4_0,
	"q4_1": C.SF_KV_Q4_1, "iq4_nl": C.SF_KV_IQ4_NL, "q5_0": C.SF_KV_Q5_0, "q5_1": C.SF_KV_Q5_1,
}

// CheckCacheTypes refuses, by name, a K or V cache type the engine does
// not know, and a quantized V cache with flash attention off (llama.cpp
// reads V transposed without it, which quantized rows cannot be). An
// empty name is no type (Options' empty fields are f16 by the time Open
// checks them); an empty mode is the default.
func CheckCacheTypes(typeK, typeV, flashAttn string) error {
	for _, c := range []struct{ flag, name string }{{"cache-type-k", typeK}, {"cache-type-v", typeV}} {
		if _, ok := cacheTypeIDs[c.name]; !ok {
			return fmt.Errorf("--%s %q: unknown KV cache type (want one of %s)", c.flag, c.name, strings.Join(CacheTypes, ", "))
		}
	}
	if flashAttn == "off" && QuantizedCacheType(typeV) {
		return fmt.Errorf("--cache-type-v %s needs flash attention, and --flash-attn is off", typeV)
	}
	return nil
}

// QuantizedCacheType reports whether a cache type is a quantized one
// (blocks of values with a scale), not a float type.
func QuantizedCacheType(name string) bool {
	switch cmp.Or(name, "f16") {
	case "f32", "f16", "bf16":
		return false
	}
	return true
}

var flashAttnModes = map[string]C.int32_t{"auto": -1, "off": 0, "on": 1}

// Engine is an open model with its context and lanes.
type Engine struct {
	// e is the native engine; nil once closed. The owner goroutine reads
	// it freely; text calls from other goroutines read it under textMu,
	// which Close holds exclusively while it clears it.
	e      *C.sf_engine
	textMu sync.RWMutex
	desc   engine.Descriptor
	// maxTextBytes is the most bytes Tokenize accepts (see MaxTextBytes).
	maxTextBytes int
	// The plan and event headers live in C memory so that the only Go
	// memory C sees is the record arrays, pinned for the call.
	cplan   *C.sf_plan
	cevents *C.sf_events
	pinner  runtime.Pinner

	tokens []engine.TokenEvent
	top    []engine.TopLogprob
	lanes  []engine.LaneEvent
	events engine.Events

	// grammars caches compiled grammars by digest (grammar.go).
	grammars *engine.GrammarCache

	// Embed's reused arrays (embed.go) and its vectors' length.
	embedTokens []engine.Token
	embedInputs []embedInput
	embedDim    int
}

var _ engine.Engine = (*Engine)(nil)

// Open loads a model and creates its context.
func Open(opts Options) (*Engine, error) {
	o := opts.withDefaults()
	fa, ok := flashAttnModes[o.FlashAttn]
	if !ok {
		return nil, fmt.Errorf("cgo: flash attention %q: want on, off or auto", o.FlashAttn)
	}
	if err := CheckCacheTypes(o.CacheTypeK, o.CacheTypeV, o.FlashAttn); err != nil {
		return nil, fmt.Errorf("cgo: %w", err)
	}
	if _, err := os.Stat(o.ModelPath); err != nil {
		return nil, fmt.Errorf("cgo: model: %w", err)
	}
	digest, err := gguf.ModelDigest(o.ModelPath)
	if err != nil {
		return nil, fmt.Errorf("cgo: model %s: %w", o.ModelPath, err)
	}
	id, err := hex.DecodeString(digest)
	if err != nil {
		return nil, fmt.Errorf("cgo: model digest %q: %w", digest, err)
	}
	loraIDs, err := fileDigests(o.LoRA)
	if err != nil {
		return nil, fmt.Errorf("cgo: LoRA adapter: %w", err)
	}
	logCPUFeatures()
	if err := loadGPUBackend(); err != nil {
		return nil, err
	}

	var p C.sf_open_params
	path := C.CString(o.ModelPath)
	defer C.free(unsafe.Pointer(path))
	p.model_path = path
	p.n_ctx = C.int32_t(o.Ctx)
	p.n_seq_max = C.int32_t(o.Seqs)
	p.n_batch = C.int32_t(o.Batch)
	p.n_ubatch = C.int32_t(o.UBatch)
	p.n_threads = C.int32_t(o.Threads)
	p.type_k = cacheTypeIDs[o.CacheTypeK]
	p.type_v = cacheTypeIDs[o.CacheTypeV]
	p.flash_attn = fa
	if !o.NoMmap {
		p.use_mmap = 1
	}
	if !o.NoRepack {
		p.use_extra_bufts = 1
	}
	switch {
	case o.Poll == 0:
		p.poll = DefaultPoll
	case o.Poll == PollOff:
		p.poll = 0
	case o.Poll == PollNone:
		p.poll = -1
	default:
		p.poll = C.int32_t(o.Poll) // the engine refuses what is not 1..100
	}
	p.max_lanes = C.int32_t(o.Lanes)
	if o.MTP {
		p.mtp = 1
	}
	p.draft_max = C.int32_t(max(0, min(o.DraftMax, 1<<30)))
	p.n_gpu_layers = C.int32_t(gpuLayers(o.GPULayers))
	for i := 0; i < len(p.model_id) && i < len(id); i++ {
		p.model_id[i] = C.uint8_t(id[i])
	}
	if len(o.LoRA) > 0 {
		paths := make([]*C.char, len(o.LoRA))
		for i, lp := range o.LoRA {
			paths[i] = C.CString(lp)
			defer C.free(unsafe.Pointer(paths[i]))
		}
		// C memory for the array: cgo forbids passing Go memory that
		// holds Go pointers, and these point to C strings.
		arr := (**C.char)(C.calloc(C.size_t(len(paths)), C.size_t(unsafe.Sizeof(paths[0]))))
		defer C.free(unsafe.Pointer(arr))
		copy(unsafe.Slice(arr, len(paths)), paths)
		p.lora_paths = arr
		p.n_lora = C.int32_t(len(paths))
	}
	var errBuf [512]C.char
	ce := C.sf_open(&p, &errBuf[0], C.size_t(len(errBuf)))
	if ce == nil {
		msg := C.GoString(&errBuf[0])
		if why := lastLlamaError(); why != "" {
			msg += ": " + why
		}
		return nil, fmt.Errorf("cgo: open: %s", msg)
	}
	e := &Engine{e: ce}
	e.grammars = engine.NewGrammarCache(e.compileGrammar, e.freeGrammar, 0)
	e.cplan = (*C.sf_plan)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sf_plan{}))))
	e.cevents = (*C.sf_events)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sf_events{}))))
	e.fillDescriptor(o, digest)
	e.desc.LoRAIdentity = loraIDs
	e.growEvents(o.Lanes * 4)
	return e, nil
}

// maxTextBytesPerPiece is the multiple of the longest token piece a text
// may hold per context token: text is mostly the concatenation of its
// tokens' pieces, so more bytes than n_ctx times the longest piece cannot
// fit the context; the factor 2 leaves room for normalizers that drop input
// bytes.
const maxTextBytesPerPiece = 2

// minMaxTextBytes keeps the bound usable for tiny contexts.
const minMaxTextBytes = 1 << 16

func (e *Engine) fillDescriptor(o Options, identity string) {
	var d C.sf_desc
	C.sf_describe(e.e, &d)
	eog := unsafe.Slice((*int32)(unsafe.Pointer(d.eog)), int(d.n_eog))
	e.embedDim = int(d.n_embd_pooled)
	e.maxTextBytes = max(minMaxTextBytes, maxTextBytesPerPiece*int(d.n_ctx)*max(int(d.max_piece_bytes), 1))
	e.desc = engine.Descriptor{
		Architecture:        C.GoString(&d.arch[0]),
		Vocab:               int(d.n_vocab),
		Ctx:                 int(d.n_ctx),
		CtxTrain:            int(d.n_ctx_train),
		Seqs:                int(d.n_seq_max),
		Lanes:               o.Lanes,
		Batch:               int(d.n_batch),
		UBatch:              min(o.UBatch, int(d.n_batch)), // as llama.cpp clamps it
		Embd:                int(d.n_embd),
		Layers:              int(d.n_layer),
		CacheTypeK:          C.GoString(&d.type_k[0]),
		CacheTypeV:          C.GoString(&d.type_v[0]),
		KVBytesPerToken:     int64(d.kv_bytes_per_token),
		RecurrentStateBytes: int64(d.recurrent_state_bytes),
		MTPBytes:            int64(d.mtp_bytes),
		BOS:                 int32(d.bos),
		EOS:                 int32(d.eos),
		EOT:                 int32(d.eot),
		EOG:                 append([]int32(nil), eog...),
		AddBOS:              d.add_bos != 0,
		ChatTemplate:        C.GoString(d.chat_template),
		PartialTruncation:   d.partial_truncation != 0,
		Partial:             partialOf(d.partial),
		SlidingWindow:       int(d.n_swa),
		CheckpointEvery:     int(d.ckpt_every),
		CheckpointMax:       int(d.ckpt_max),
		CheckpointTail:      int(d.ckpt_tail),
		Drafts:              d.drafts != 0,
		DraftMax:            int(d.draft_max),
		DraftsRefused:       C.GoString(d.drafts_refused), // "" for null,
		Params:              uint64(d.n_params),
		ModelBytes:          uint64(d.model_bytes),
		Identity:            identity,
		Pooling:             engine.Pooling(d.pooling),
		RerankTemplate:      C.GoString(d.rerank_template),
		SEP:                 int32(d.sep),
		AddEOS:              d.add_eos != 0,
		AddSEP:              d.add_sep != 0,
		LoRA:                int(d.n_lora),
		FIM: engine.FIM{
			Prefix:   int32(d.fim_pre),
			Suffix:   int32(d.fim_suf),
			Middle:   int32(d.fim_mid),
			Pad:      int32(d.fim_pad),
			RepoName: int32(d.fim_rep),
			FileSep:  int32(d.fim_sep),
		},
		Recommended: engine.ModelSampling{
			TopK:    int32(d.rec_top_k),
			TopP:    float32(d.rec_top_p),
			MinP:    float32(d.rec_min_p),
			HasTopK: d.rec_has&C.SF_REC_TOP_K != 0,
			HasTopP: d.rec_has&C.SF_REC_TOP_P != 0,
			HasMinP: d.rec_has&C.SF_REC_MIN_P != 0,
		},
	}
}

// Close frees the context, the model and the arenas. It waits for the text
// calls in flight; those that come after find the engine closed.
func (e *Engine) Close() error {
	if e == nil || e.e == nil {
		return nil
	}
	e.grammars.Close()
	e.textMu.Lock()
	ce := e.e
	e.e = nil
	e.textMu.Unlock()
	C.sf_close(ce)
	C.free(unsafe.Pointer(e.cplan))
	C.free(unsafe.Pointer(e.cevents))
	e.cplan, e.cevents = nil, nil
	return nil
}

// Descriptor describes the model and the engine.
func (e *Engine) Descriptor() *engine.Descriptor { return &e.desc }

// RepackedBytes is how many bytes of the model's weights the CPU backend
// holds repacked (interleaved rows for its AVX2 kernels): 0 under
// Options.NoRepack, on a build without repacking, or for a model with no
// repackable weight type (Q8_0 and F16 are not repacked on x86). Weights
// never change once loaded, so any goroutine may ask, as for text calls.
func (e *Engine) RepackedBytes() int64 {
	e.textMu.RLock()
	defer e.textMu.RUnlock()
	if e.e == nil {
		return 0
	}
	name := C.CString("CPU_REPACK")
	defer C.free(unsafe.Pointer(name))
	return int64(C.sf_weight_bytes_in(e.e, name))
}

func (e *Engine) err(op string, rc C.int) error {
	if rc == C.SF_OK {
		return nil
	}
	return &engine.Error{Status: engine.Status(rc), Op: op, Msg: C.GoString(C.sf_last_error(e.e))}
}

// errClosed is returned by calls on a closed engine; errors.Is(err,
// engine.ErrClosed) holds.
var errClosed error = &engine.Error{Status: engine.StatusClosed, Op: "cgo", Msg: "the engine is closed"}
