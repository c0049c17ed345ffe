package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"superfluid/cgo"
	"superfluid/embed"
	"superfluid/engine"
	"superfluid/gguf"
	sfhttp "superfluid/http"
	"superfluid/metric"
	"superfluid/sched"
	"superfluid/task"
)

// An embedding model (its GGUF names <arch>.pooling_type mean, cls or
// last) is served by an embedding runner instead of the scheduler: its
// engine pools, it does not generate, so there are no lanes and no prefix
// cache; the generation routes answer 400.

const (
	// defaultEmbedBatch is the most tokens one embedding call carries, and
	// so the longest input (llama-server's n_ubatch default, which it also
	// makes n_batch for embeddings); --batch raises it.
	defaultEmbedBatch = 512
	// embedSeqs is how many inputs one call may carry.
	embedSeqs = 64
)

// isEmbeddingModel reports whether the model file names a pooling type
// other than none. A file that cannot be read is left to cgo.Open to
// refuse with its own message.
func isEmbeddingModel(path string) bool {
	f, err := gguf.Open(path)
	if err != nil {
		return false
	}
	arch, _ := f.String("general.architecture")
	p, ok := f.Uint32(arch + ".pooling_type")
	return ok && p != 0
}

// openEmbeddingStack opens an embedding model and starts its runner,
// which takes its engine calls in turn at arb (nil: alone); the model then
// serves embeddings and refuses generation. openModelStack calls it for a
// model whose GGUF names a pooling type.
func openEmbeddingStack(spec ModelSpec, o Options, arb *sched.Arbiter) (*modelStack, error) {
	if len(spec.LoRA) > 0 {
		return nil, fmt.Errorf("app: %s pools (an embedding model or a reranker): LoRA adapters apply to a generation model", spec.Path)
	}
	start := time.Now()
	batch := max(o.Batch, defaultEmbedBatch)
	// One call is one micro-batch whose sequences are emptied after it, so
	// the KV pool needs room for one call's tokens and no more.
	eng, err := cgo.Open(cgo.Options{ModelPath: spec.Path, Ctx: batch, Lanes: 1, Seqs: max(o.Seqs, embedSeqs),
		Batch: batch, UBatch: batch, Threads: o.Threads, CacheTypeK: o.CacheTypeK, CacheTypeV: o.CacheTypeV, FlashAttn: o.FlashAttn, Poll: o.Poll})
	if err != nil {
		return nil, err
	}
	desc := eng.Descriptor()
	if desc.Pooling == engine.PoolingNone {
		eng.Close()
		return nil, fmt.Errorf("app: %s names a pooling type the engine did not take", spec.Path)
	}
	ms := &modelStack{Engine: eng, Size: measuredSize(desc, 0)}
	cfg := embed.Config{}
	if arb != nil {
		ms.turn = arb.Join(spec.Alias)
		cfg.Turns = ms.turn
	}
	runner, err := embed.New(eng, cfg)
	if err != nil {
		if ms.turn != nil {
			ms.turn.Leave()
		}
		eng.Close()
		return nil, err
	}
	tuneGC()
	ms.Model = &sfhttp.Model{Model: task.Model{Name: spec.Alias, Path: spec.Path, Desc: desc, Text: eng, Embed: embedView{runner}}}
	ms.Model.Prepare()
	// The runner stops and is waited for where the scheduler would be.
	ctx, cancel := context.WithCancel(context.Background())
	ms.stopSched, ms.schedDone = cancel, make(chan error, 1)
	go func() { ms.schedDone <- runner.Run(ctx) }()
	maxIn, maxTok := eng.EmbedLimits()
	slog.Info("embedding model loaded", "model", spec.Alias, "took", time.Since(start).Round(time.Millisecond),
		"pooling", desc.Pooling, "dim", eng.EmbedDim(), "inputs_per_call", maxIn, "tokens_per_call", maxTok, "bytes", ms.Size)
	return ms, nil
}

// embedView is the runner as the HTTP handlers see it.
type embedView struct{ r *embed.Runner }

func (v embedView) Embed(ctx context.Context, inputs [][]engine.Token, c sched.Class) ([][]float32, error) {
	return v.r.Embed(ctx, inputs, c)
}

func (v embedView) MaxInputTokens() int { return v.r.MaxInputTokens() }
func (v embedView) Dim() int            { return v.r.Dim() }

func (v embedView) AddMetrics(p *metric.Page) { v.r.AddMetrics(p) }
