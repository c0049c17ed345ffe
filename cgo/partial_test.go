package cgo

import (
	"slices"
	"testing"
	"time"

	"superfluid/engine"
)

// runLane admits a greedy lane on seq whose first cached prompt tokens the
// sequence holds, prefills the rest in chunks, decodes maxTokens and
// retires it; it returns the tokens and the prefill's wall time.
func runLane(t testing.TB, e *Engine, seq int32, prompt []engine.Token, cached, maxTokens, chunk int) ([]engine.Token, time.Duration) {
	t.Helper()
	const lane = 7
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: lane, Seq: seq, Cached: uint32(cached), MaxTokens: uint32(maxTokens), Sampling: engine.Greedy()}, prompt, nil)
	var out []engine.Token
	var prefill time.Duration
	start := time.Now()
	for fed, done := cached, false; !done; {
		if fed < len(prompt) {
			n := min(chunk, len(prompt)-fed)
			p.Prefills = append(p.Prefills, engine.Prefill{Lane: lane, Offset: uint32(fed), Count: uint32(n)})
			fed += n
		} else {
			p.Decodes = append(p.Decodes, engine.Decode{Lane: lane})
		}
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatalf("tick: %v", err)
		}
		p.Reset()
		for _, te := range ev.Tokens {
			if len(out) == 0 {
				prefill = time.Since(start)
			}
			out = append(out, te.Token)
			done = done || te.Finish != engine.FinishNone
		}
	}
	p.Reset()
	p.Retires = append(p.Retires, lane)
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	return out, prefill
}

// A sliding-window model's stream, exported and imported, has lost the
// cells before its last window, and a hybrid model's recurrent state is
// only at its end: a cut far back is refused by MinCut, and a checkpoint
// the engine took while prefilling resumes the stream there with the
// output of a cold run. The checkpoints' sizes and what they save are
// logged (the figures behind SF_CKPT_EVERY).
func TestPartialStateResumesFromACheckpoint(t *testing.T) {
	if !upstreamLlama {
		t.Skip("gemma4 and qwen35 need the upstream llama.cpp")
	}
	for _, tc := range []struct {
		arch    string
		partial engine.Partial
	}{{"gemma4", engine.PartialSWA}, {"qwen35", engine.PartialRecurrent}} {
		t.Run(tc.arch, func(t *testing.T) { resumeFromCheckpoint(t, tc.arch, tc.partial) })
	}
}

func resumeFromCheckpoint(t *testing.T, arch string, partial engine.Partial) {
	e, err := Open(Options{ModelPath: archModel(t, arch), Ctx: 4096, Lanes: 1, Seqs: 4, Batch: 512, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	d := e.Descriptor()
	if d.Partial != partial || (partial == engine.PartialSWA) != (d.SlidingWindow > 0) || d.PartialTruncation || d.CheckpointEvery <= 0 {
		t.Fatalf("descriptor: partial %q, window %d, truncation %v, every %d", d.Partial, d.SlidingWindow, d.PartialTruncation, d.CheckpointEvery)
	}
	stream := promptTokens(t, e, 1400, "window")
	if _, err := e.TakeCheckpoints(0); err != nil {
		t.Fatal(err)
	}
	_, cold := runLane(t, e, 0, stream, 0, 1, 64)
	cps, err := e.TakeCheckpoints(0)
	if err != nil || len(cps) == 0 {
		t.Fatalf("checkpoints %v, %v", len(cps), err)
	}
	var pos []int
	for _, cp := range cps {
		pos = append(pos, cp.Pos)
	}
	if pos[len(pos)-1] != len(stream) {
		t.Fatalf("checkpoints at %v: none at the prompt's end %d", pos, len(stream))
	}
	blob, err := e.Export(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s tiny: window %d, checkpoints at %v, %d bytes each (stream state %d bytes for %d tokens); cold prefill of %d tokens %v",
		arch, d.SlidingWindow, pos, len(cps[0].Blob), len(blob), e.SeqLen(0), len(stream), cold)

	if err := e.Free(0); err != nil {
		t.Fatal(err)
	}
	// The divergence: 85% into the stream, more than a window back.
	div := len(stream) * 85 / 100
	prompt := slices.Concat(stream[:div], promptTokens(t, e, 64, "edited"))
	want, _ := runLane(t, e, 1, prompt, 0, 12, 512)

	if err := e.Free(1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Import(2, blob); err != nil {
		t.Fatal(err)
	}
	if mc := e.MinCut(2); mc <= div || mc > e.SeqLen(2) {
		t.Fatalf("imported stream: min cut %d, want within (%d, %d]", mc, div, e.SeqLen(2))
	}
	var cp engine.Checkpoint
	for _, c := range cps {
		if c.Pos <= div {
			cp = c
		}
	}
	if cp.Pos == 0 {
		t.Fatalf("no checkpoint before %d in %v", div, pos)
	}
	if err := e.RestoreCheckpoint(2, engine.Checkpoint{Pos: cp.Pos + 1, Blob: cp.Blob}); err == nil {
		t.Fatal("a checkpoint restored at another position")
	}
	if _, err := e.Import(2, blob); err != nil {
		t.Fatal(err)
	}
	restoreStart := time.Now()
	if err := e.RestoreCheckpoint(2, cp); err != nil {
		t.Fatal(err)
	}
	restore := time.Since(restoreStart)
	if n, mc := e.SeqLen(2), e.MinCut(2); n != cp.Pos || mc > n {
		t.Fatalf("after the restore: %d tokens, min cut %d; want %d", n, mc, cp.Pos)
	}
	got, warm := runLane(t, e, 2, prompt, cp.Pos, 12, 512)
	if !slices.Equal(got, want) {
		t.Fatalf("resumed at %d: %v, cold %v", cp.Pos, got, want)
	}
	t.Logf("diverging at %d: resumed at %d (restore %v, prefill of the rest %v)", div, cp.Pos, restore, warm)

	// A copy of the resident stream to the checkpoint, then the restore:
	// the cache's path for a resident entry.
	for _, s := range []int32{1, 2} {
		if err := e.Free(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Import(0, blob); err != nil {
		t.Fatal(err)
	}
	if err := e.CopyPrefix(0, 3, cp.Pos); err != nil {
		t.Fatal(err)
	}
	if err := e.RestoreCheckpoint(3, cp); err != nil {
		t.Fatal(err)
	}
	if got, _ := runLane(t, e, 3, prompt, cp.Pos, 12, 512); !slices.Equal(got, want) {
		t.Fatalf("copied and resumed at %d: %v, cold %v", cp.Pos, got, want)
	}
}
