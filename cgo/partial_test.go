package cgo

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/synth"
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

// takeAllCheckpoints hands over every checkpoint the engine took of seq.
func takeAllCheckpoints(t testing.TB, e *Engine, seq int32) ([]engine.Checkpoint, error) {
	t.Helper()
	pos, err := e.CheckpointPositions(seq)
	if err != nil {
		return nil, err
	}
	return e.TakeCheckpoints(seq, pos)
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
	if _, err := takeAllCheckpoints(t, e, 0); err != nil {
		t.Fatal(err)
	}
	_, cold := runLane(t, e, 0, stream, 0, 1, 64)
	cps, err := takeAllCheckpoints(t, e, 0)
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

// BenchmarkCheckpoint measures, per family and shape, what a checkpoint
// costs (bytes, time to take and to restore) against what it saves (the
// prefill of the tokens between checkpoints, at the depth of a
// conversation): the figures SF_CKPT_EVERY and SF_CKPT_MAX are chosen by.
//
//	go test -run '^$' -bench Checkpoint -benchtime 1x ./cgo/
func BenchmarkCheckpoint(b *testing.B) {
	if !upstreamLlama {
		b.Skip("gemma4 and qwen35 need the upstream llama.cpp")
	}
	for _, arch := range []string{"gemma4", "qwen35"} {
		for _, shapeName := range []string{"small", "0.5b"} {
			b.Run(arch+"/"+shapeName, func(b *testing.B) {
				shape, err := synth.ShapeByName(shapeName)
				if err != nil {
					b.Fatal(err)
				}
				path := filepath.Join(b.TempDir(), arch+".gguf")
				if err := synth.Write(path, synth.Options{Shape: shape, Type: "f16", Seed: 7, Arch: arch}); err != nil {
					b.Fatal(err)
				}
				e, err := Open(Options{ModelPath: path, Ctx: 4096, Lanes: 1, Seqs: 2, Batch: 512, Threads: 2})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				stream := promptTokens(b, e, 2048, "bench")
				for range b.N {
					e.Free(0)
					takeAllCheckpoints(b, e, 0)
					_, prefill := runLane(b, e, 0, stream, 0, 1, 512)
					cps, err := takeAllCheckpoints(b, e, 0)
					if err != nil || len(cps) == 0 {
						b.Fatalf("checkpoints: %d, %v", len(cps), err)
					}
					blob, err := e.Export(0, nil)
					if err != nil {
						b.Fatal(err)
					}
					cp := cps[len(cps)-2] // inside the stream
					e.Free(1)
					e.Import(1, blob)
					start := time.Now()
					if err := e.RestoreCheckpoint(1, cp); err != nil {
						b.Fatal(err)
					}
					restore := time.Since(start)
					perToken := prefill / time.Duration(len(stream))
					b.ReportMetric(float64(len(cp.Blob)), "ckpt-bytes")
					b.ReportMetric(float64(len(blob))/float64(len(stream)), "stream-bytes/token")
					b.ReportMetric(float64(restore.Microseconds()), "restore-us")
					b.ReportMetric(float64(perToken.Microseconds())*float64(e.Descriptor().CheckpointEvery)/1000, "prefill-ms/spacing")
					b.Logf("%s %s: checkpoint %d bytes (stream %d bytes for %d tokens), restore %v, cold prefill %v (%v/token): a checkpoint every %d tokens saves up to %v",
						arch, shapeName, len(cp.Blob), len(blob), len(stream), restore, prefill, perToken, e.Descriptor().CheckpointEvery, perToken*time.Duration(e.Descriptor().CheckpointEvery))
				}
			})
		}
	}
}

// TakeCheckpoints copies out only the positions asked for, and forgets
// every checkpoint of the sequence.
func TestTakeCheckpointsCopiesOnlyThoseAskedFor(t *testing.T) {
	if !upstreamLlama {
		t.Skip("gemma4 needs the upstream llama.cpp")
	}
	e, err := Open(Options{ModelPath: archModel(t, "gemma4"), Ctx: 4096, Lanes: 1, Seqs: 2, Batch: 512, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	runLane(t, e, 0, promptTokens(t, e, 1400, "take"), 0, 1, 512)
	pos, err := e.CheckpointPositions(0)
	if err != nil || !slices.Equal(pos, []int{512, 1024, 1400}) {
		t.Fatalf("checkpoints at %v (%v), want 512, 1024 and the prompt's end", pos, err)
	}
	cps, err := e.TakeCheckpoints(0, []int{1024, 9999})
	if err != nil || len(cps) != 1 || cps[0].Pos != 1024 || len(cps[0].Blob) == 0 {
		t.Fatalf("took %d checkpoints (%v), want the one at 1024", len(cps), err)
	}
	if pos, err := e.CheckpointPositions(0); err != nil || len(pos) != 0 {
		t.Fatalf("after the take the engine still holds checkpoints at %v (%v)", pos, err)
	}
}
