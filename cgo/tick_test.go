package cgo

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"superfluid/engine"
)

func TestBatchedLanesMatchSoloLanes(t *testing.T) {
	e := openTest(t, 4)
	prompts := [][]engine.Token{
		promptTokens(t, e, 12, "one"),
		promptTokens(t, e, 30, "two"),
		promptTokens(t, e, 7, "three"),
		promptTokens(t, e, 21, "four"),
	}
	batched := generate(t, e, prompts, 24, 64, engine.Greedy())
	for i, pr := range prompts {
		solo := generate(t, e, [][]engine.Token{pr}, 24, 64, engine.Greedy())[0]
		if !slices.Equal(batched[i], solo) {
			t.Errorf("lane %d: batched %v\nsolo %v", i, batched[i], solo)
		}
		if len(solo) != 24 {
			t.Errorf("lane %d: %d tokens, want 24", i, len(solo))
		}
	}
}

func TestChunkedPrefillMatchesWholePrefill(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 45, "chunks")
	whole := generate(t, e, [][]engine.Token{prompt}, 16, 64, engine.Greedy())[0]
	chunked := generate(t, e, [][]engine.Token{prompt}, 16, 15, engine.Greedy())[0] // three chunks
	if !slices.Equal(whole, chunked) {
		t.Fatalf("whole %v\nchunked %v", whole, chunked)
	}
}

// continueFrom admits a lane on seq whose first cached tokens are already
// there and returns its greedy continuation.
func continueFrom(t *testing.T, e *Engine, seq int32, prompt []engine.Token, cached, n int) []engine.Token {
	t.Helper()
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 7, Seq: seq, Cached: uint32(cached), MaxTokens: uint32(n), Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 7, Offset: uint32(cached), Count: uint32(len(prompt) - cached)})
	ev, err := runToEnd(e, &p)
	if err != nil {
		t.Fatal(err)
	}
	var out []engine.Token
	for _, te := range ev.Tokens {
		out = append(out, te.Token)
	}
	p.Reset()
	p.Retires = append(p.Retires, 7)
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCopiedPrefixContinuesLikeRecomputation(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 40, "prefix")
	if err := e.Free(0); err != nil {
		t.Fatal(err)
	}
	cold := continueFrom(t, e, 0, prompt, 0, 12)
	// Sequence 0 now holds the prompt and 11 fed replies; share its first 30
	// tokens with sequence 3 and continue from there.
	if err := e.CopyPrefix(0, 3, 30); err != nil {
		t.Fatal(err)
	}
	if got := e.SeqLen(3); got != 30 {
		t.Fatalf("copied sequence holds %d tokens", got)
	}
	warm := continueFrom(t, e, 3, prompt, 30, 12)
	if !slices.Equal(cold, warm) {
		t.Fatalf("cold %v\nwarm %v", cold, warm)
	}
	// Truncation gives the same starting point.
	if err := e.Truncate(0, 25); err != nil {
		t.Fatal(err)
	}
	if again := continueFrom(t, e, 0, prompt, 25, 12); !slices.Equal(cold, again) {
		t.Fatalf("cold %v\ntruncated %v", cold, again)
	}
}

func TestExportedStateContinuesIdentically(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 33, "export")
	e.Free(1)
	cold := continueFrom(t, e, 1, prompt, 0, 10)
	if err := e.Truncate(1, 33); err != nil {
		t.Fatal(err)
	}
	blob, err := e.Export(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.Import(4, blob); err != nil || n != 33 {
		t.Fatalf("import: %d tokens, %v", n, err)
	}
	// Exported state of 33 tokens; continue with the last prompt token
	// re-fed, as admission requires at least one token to prefill.
	if err := e.Truncate(4, 32); err != nil {
		t.Fatal(err)
	}
	warm := continueFrom(t, e, 4, prompt, 32, 10)
	if !slices.Equal(cold, warm) {
		t.Fatalf("cold %v\nimported %v", cold, warm)
	}
	// A state of version 1, checksummed byte by byte (parked by an
	// earlier build), is still imported.
	old := slices.Clone(blob)
	binary.LittleEndian.PutUint32(old[4:], 1)
	sum := uint64(1469598103934665603)
	for _, b := range old[stateHeaderLen:] {
		sum = (sum ^ uint64(b)) * 1099511628211
	}
	binary.LittleEndian.PutUint64(old[56:], sum)
	if n, err := e.Import(4, old); err != nil || n != 33 {
		t.Fatalf("import of a version 1 state: %d tokens, %v", n, err)
	}
	// A flipped byte is refused, in either version.
	for _, b := range [][]byte{blob, old} {
		b[len(b)/2] ^= 0x40
		if _, err := e.Import(4, b); err == nil {
			t.Fatalf("corrupted state of version %d imported", b[4])
		}
	}
}

// stateHeaderLen is the length of the header native/seq.cpp puts before an
// exported state (magic, version, model, KV type, tokens, length, checksum).
const stateHeaderLen = 64

func TestSeededSamplingRepeats(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 10, "seed")
	s := engine.Sampling{Temperature: 1.2, TopK: 40, TopP: 0.95, MinP: 0.01, RepeatPenalty: 1.1, PenaltyLastN: 64, Seed: 42}
	a := generate(t, e, [][]engine.Token{prompt}, 24, 64, s)[0]
	b := generate(t, e, [][]engine.Token{prompt}, 24, 64, s)[0]
	if !slices.Equal(a, b) {
		t.Fatalf("same seed differs:\n%v\n%v", a, b)
	}
	s.Seed = 43
	c := generate(t, e, [][]engine.Token{prompt}, 24, 64, s)[0]
	if slices.Equal(a, c) {
		t.Fatalf("different seeds gave the same %v", a)
	}
}

// A tick is one step: a plan of two decoding lanes samples one token for
// each and reports the step's time, and a lane admitted in a plan cannot
// decode in it (its first token comes from its prefill's last row).
func TestTickIsOneStep(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 6, "one step")
	var p engine.Plan
	for i := range 2 {
		e.Free(int32(i))
		p.AddAdmit(engine.Admit{Lane: uint32(i + 1), Seq: int32(i), Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: uint32(i + 1), Count: uint32(len(prompt))})
	}
	ev, err := e.Tick(&p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Tokens) != 2 || ev.Timings.PrefillTokens != 12 || ev.Timings.StepNS <= 0 {
		t.Fatalf("prefill step: %d tokens, %+v", len(ev.Tokens), ev.Timings)
	}
	for range 3 {
		p.Reset()
		p.Decodes = append(p.Decodes, engine.Decode{Lane: 1}, engine.Decode{Lane: 2})
		ev, err = e.Tick(&p)
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Tokens) != 2 || ev.Tokens[0].Lane == ev.Tokens[1].Lane || ev.Timings.DecodeTokens != 2 || ev.Timings.StepNS <= 0 {
			t.Fatalf("decode step: %+v, %+v", ev.Tokens, ev.Timings)
		}
	}
	p.Reset()
	p.Retires = []uint32{1, 2}
	if ev, err = e.Tick(&p); err != nil || ev.Timings.StepNS != 0 {
		t.Fatalf("a retire-only plan ran a step: %v, %+v", err, ev.Timings)
	}
	p.Reset()
	e.Free(0)
	p.AddAdmit(engine.Admit{Lane: 3, Seq: 0, Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 3, Count: uint32(len(prompt))})
	p.Decodes = append(p.Decodes, engine.Decode{Lane: 3})
	if _, err := e.Tick(&p); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("decode of a lane admitted in the plan: %v", err)
	}
}

func TestLogprobsAndFinishReasons(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 6, "logprobs")
	e.Free(0)
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: 3, Logprobs: 5, Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: uint32(len(prompt))})
	ev, err := runToEnd(e, &p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Tokens) != 3 || ev.Tokens[2].Finish != engine.FinishLength {
		t.Fatalf("tokens %+v", ev.Tokens)
	}
	for i := range ev.Tokens {
		te := &ev.Tokens[i]
		top := ev.TopOf(te)
		if len(top) != 5 || top[0].Token != te.Token || top[0].Logprob != te.Logprob || te.Logprob > 0 {
			t.Fatalf("token %d: %+v top %+v", i, te, top)
		}
		for j := 1; j < len(top); j++ {
			if top[j].Logprob > top[j-1].Logprob {
				t.Fatalf("top not sorted: %+v", top)
			}
		}
	}
	if len(ev.Lanes) != 1 || ev.Lanes[0].Finish != engine.FinishLength || ev.Lanes[0].Generated != 3 {
		t.Fatalf("lanes %+v", ev.Lanes)
	}
}

func TestSteadyStateTickAllocatesNothing(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 8, "allocs")
	e.Free(0)
	e.Free(1)
	var p engine.Plan
	for i := range 2 {
		p.AddAdmit(engine.Admit{Lane: uint32(i), Seq: int32(i), Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: uint32(i), Count: uint32(len(prompt))})
	}
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	allocs := testing.AllocsPerRun(50, func() {
		p.Decodes = append(p.Decodes[:0], engine.Decode{Lane: 0}, engine.Decode{Lane: 1})
		if _, err := e.Tick(&p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a steady-state tick allocates %v times", allocs)
	}
}
