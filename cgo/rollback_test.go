package cgo

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"superfluid/engine"
)

// hybridDraftMax is the draft bound the hybrid tests open qwen35 with.
const hybridDraftMax = 4

// openHybrid opens a synthetic qwen35 (attention and gated delta-net
// layers) for drafts of up to draftMax tokens (0: no speculation).
func openHybrid(t *testing.T, lanes, draftMax int) *Engine {
	t.Helper()
	if !upstreamLlama {
		t.Skip("qwen35 and recurrent-state rollback need the upstream llama.cpp")
	}
	e, err := Open(Options{ModelPath: archModel(t, "qwen35"), Ctx: 1024, Lanes: lanes, Seqs: lanes + 4, Batch: 256, Threads: 1, DraftMax: draftMax})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// A hybrid model opened for speculation takes drafts up to the bound it
// was opened with, its recurrent state holding a snapshot per draft
// position; opened without, or with a bound its micro-batch cannot hold,
// it refuses them and says why.
func TestHybridDraftsNeedRollbackSnapshots(t *testing.T) {
	plain := openHybrid(t, 1, 0).Descriptor()
	if plain.Drafts || plain.DraftMax != 0 || !strings.Contains(plain.DraftsRefused, "without a draft bound") {
		t.Fatalf("opened without a bound: drafts %v, max %d, refused %q", plain.Drafts, plain.DraftMax, plain.DraftsRefused)
	}
	d := openHybrid(t, 1, hybridDraftMax).Descriptor()
	if !d.Drafts || d.DraftMax != hybridDraftMax || d.DraftsRefused != "" || d.Partial != engine.PartialRecurrent {
		t.Fatalf("opened for drafts of %d: drafts %v, max %d, refused %q, partial %q", hybridDraftMax, d.Drafts, d.DraftMax, d.DraftsRefused, d.Partial)
	}
	// llama.cpp widens every recurrent row to 1 + n_rs_seq snapshots.
	if plain.RecurrentStateBytes <= 0 || d.RecurrentStateBytes != plain.RecurrentStateBytes*(1+hybridDraftMax) {
		t.Fatalf("recurrent state %d bytes with %d snapshots, %d without", d.RecurrentStateBytes, hybridDraftMax, plain.RecurrentStateBytes)
	}
	if d.KVBytesPerToken != plain.KVBytesPerToken {
		t.Fatalf("attention bytes per token %d with snapshots, %d without", d.KVBytesPerToken, plain.KVBytesPerToken)
	}

	for _, c := range []struct {
		arch          string
		ubatch, draft int
		want          string
	}{{"qwen35", 8, 7, "micro-batch"}, {"gemma4", 0, hybridDraftMax, "sliding-window"}} {
		e, err := Open(Options{ModelPath: archModel(t, c.arch), Ctx: 512, Lanes: 1, Seqs: 2, Batch: 64, UBatch: c.ubatch, Threads: 1, DraftMax: c.draft})
		if err != nil {
			t.Fatal(err)
		}
		d := e.Descriptor()
		e.Close()
		if d.Drafts || !strings.Contains(d.DraftsRefused, c.want) {
			t.Fatalf("%s, drafts of %d in micro-batches of %d: drafts %v, refused %q", c.arch, c.draft, c.ubatch, d.Drafts, d.DraftsRefused)
		}
	}
}

// A draft on a hybrid model that refuses drafts, or longer than the
// snapshots it keeps, fails its lane with the reason and the engine keeps
// serving (llama.cpp would otherwise roll back from planes it never wrote).
func TestHybridDraftPastTheSnapshotsFailsItsLane(t *testing.T) {
	for _, c := range []struct {
		draftMax, draftLen int
		want               string
	}{{0, 1, "refuses drafts"}, {hybridDraftMax, hybridDraftMax + 1, "rolls back"}} {
		e := openHybrid(t, 1, c.draftMax)
		prompt := promptTokens(t, e, 12, "hostile")
		var p engine.Plan
		p.AddAdmit(engine.Admit{Lane: 9, Seq: 0, MaxTokens: 8, Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: 9, Count: uint32(len(prompt))})
		if _, err := e.Tick(&p); err != nil {
			t.Fatal(err)
		}
		p.Reset()
		p.AddDraft(9, prompt[:c.draftLen])
		_, err := e.Tick(&p)
		var ee *engine.Error
		if !errors.As(err, &ee) || !ee.HasLane || ee.Lane != 9 || !strings.Contains(ee.Msg, c.want) {
			t.Fatalf("draft of %d on a bound of %d: %v, want the lane's refusal %q", c.draftLen, c.draftMax, err, c.want)
		}
		p.Reset()
		p.Retires = append(p.Retires, 9)
		if _, err := e.Tick(&p); err != nil {
			t.Fatalf("retiring the refused lane: %v", err)
		}
		if got := generate(t, e, [][]engine.Token{prompt}, 4, 64, engine.Greedy()); len(got[0]) != 4 {
			t.Fatalf("after the refusal: %d tokens", len(got[0]))
		}
	}
}

// On a hybrid model drafted lanes give exactly the tokens and logprobs of
// plain decoding, whatever share of each draft is accepted, for greedy,
// penalised, sampled and logprobs lanes, and leave their sequences as
// plain decoding does: each rejected draft is rolled back out of the
// recurrent state as well as the attention cells.
func TestHybridDraftsGiveThePlainTokens(t *testing.T) {
	e := openHybrid(t, 4, hybridDraftMax)
	sampled := engine.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1, PenaltyLastN: 64, Seed: 11}
	penalized := engine.Sampling{TopP: 1, RepeatPenalty: 1.3, FrequencyPenalty: 0.2, PresencePenalty: 0.1, PenaltyLastN: 64}
	lanes := []specLane{
		{prompt: promptTokens(t, e, 20, "greedy"), admit: engine.Admit{MaxTokens: 32, Sampling: engine.Greedy()}},
		{prompt: promptTokens(t, e, 17, "penalties"), admit: engine.Admit{MaxTokens: 32, Sampling: penalized},
			bias: []engine.LogitBias{{Token: 5, Bias: 2}, {Token: 9, Bias: float32(math.Inf(-1))}}},
		{prompt: promptTokens(t, e, 25, "sampled"), admit: engine.Admit{MaxTokens: 32, Sampling: sampled}},
		{prompt: promptTokens(t, e, 14, "logprobs"), admit: engine.Admit{MaxTokens: 32, Logprobs: 3, Sampling: engine.Greedy()}},
	}
	plain := runDrafted(t, e, lanes, nil)
	for _, k := range []int{1, 3, hybridDraftMax} {
		got := runDrafted(t, e, lanes, oracleDrafts(plain.out, k))
		for i := range lanes {
			if !slices.Equal(got.out[i], plain.out[i]) {
				t.Fatalf("k %d lane %d: drafted %v\nplain %v", k, i, got.out[i], plain.out[i])
			}
			for j := range got.lp[i] {
				if d := math.Abs(float64(got.lp[i][j] - plain.lp[i][j])); d > 1e-3 {
					t.Fatalf("k %d lane %d token %d: logprob %v, plain %v", k, i, j, got.lp[i][j], plain.lp[i][j])
				}
			}
			if got.seqLen[i] != plain.seqLen[i] || got.seqLen[i] != len(lanes[i].prompt)+len(plain.out[i])-1 {
				t.Fatalf("k %d lane %d: the sequence holds %d tokens, plain %d", k, i, got.seqLen[i], plain.seqLen[i])
			}
		}
		tm := got.timings
		if tm.DraftAccepted == 0 || tm.DraftAccepted >= tm.DraftTokens {
			t.Fatalf("k %d: %d of %d draft tokens accepted", k, tm.DraftAccepted, tm.DraftTokens)
		}
		t.Logf("k %d: %d of %d draft tokens accepted, %d decode rows (plain %d)", k, tm.DraftAccepted, tm.DraftTokens, tm.DecodeTokens, plain.timings.DecodeTokens)
	}
}

// rejectedDrafts runs a lane on seq: prompt prefilled, then steps decodes
// each carrying a draft of k tokens none of which greedy decoding picks
// here (each the token just sampled, plus one), so that every step rolls
// its draft back and the last leaves a rollback pending, which llama.cpp
// applies at the sequence's next decode. It returns what the sequence
// holds.
func rejectedDrafts(t *testing.T, e *Engine, seq int32, prompt []engine.Token, steps, k int) []engine.Token {
	t.Helper()
	if err := e.Free(seq); err != nil {
		t.Fatal(err)
	}
	const lane = 40
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: lane, Seq: seq, MaxTokens: uint32(steps + 2), Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: lane, Count: uint32(len(prompt))})
	var out []engine.Token
	rejected := 0
	for step := 0; step <= steps; step++ {
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		rejected += int(ev.Timings.DraftTokens - ev.Timings.DraftAccepted)
		for _, te := range ev.Tokens {
			out = append(out, te.Token)
		}
		p.Reset()
		if step == steps {
			break
		}
		last := out[len(out)-1]
		draft := make([]engine.Token, k)
		for i := range draft {
			draft[i] = (last + 1 + engine.Token(i)) % 200
		}
		p.AddDraft(lane, draft)
	}
	p.Retires = append(p.Retires, lane)
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	if rejected == 0 {
		t.Fatal("no draft token was rejected")
	}
	held := slices.Concat(prompt, out[:len(out)-1]) // the last token sampled is not fed yet
	if n := e.SeqLen(seq); n != len(held) {
		t.Fatalf("the sequence holds %d tokens, want %d", n, len(held))
	}
	return held
}

// continuation is what a lane on seq, which holds cached tokens of
// prompt, samples greedily for the rest of prompt: tokens and logprobs.
type continuation struct {
	tokens []engine.Token
	lp     []float32
}

func continueLogprobs(t *testing.T, e *Engine, seq int32, prompt []engine.Token, cached int) continuation {
	t.Helper()
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 8, Seq: seq, Cached: uint32(cached), MaxTokens: 8, Logprobs: 2, Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 8, Offset: uint32(cached), Count: uint32(len(prompt) - cached)})
	ev, err := runToEnd(e, &p)
	if err != nil {
		t.Fatal(err)
	}
	var c continuation
	for _, te := range ev.Tokens {
		c.tokens = append(c.tokens, te.Token)
		c.lp = append(c.lp, te.Logprob)
	}
	p.Reset()
	p.Retires = append(p.Retires, 8)
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	return c
}

// sameContinuation fails unless got is want: the same tokens with the
// same logprobs (the state each continued from is the same).
func sameContinuation(t *testing.T, what string, got, want continuation) {
	t.Helper()
	if !slices.Equal(got.tokens, want.tokens) {
		t.Fatalf("%s: %v, a fresh prefill gives %v", what, got.tokens, want.tokens)
	}
	for i := range got.lp {
		if d := math.Abs(float64(got.lp[i] - want.lp[i])); d > 1e-3 {
			t.Fatalf("%s: token %d logprob %v, a fresh prefill gives %v", what, i, got.lp[i], want.lp[i])
		}
	}
}

// After a rejected draft's rollback (pending until the sequence's next
// decode), every memory operation the prefix cache performs leaves a state
// that continues exactly as a fresh prefill of the same tokens: a copy to
// another sequence (which shares the recurrent cell but not the pending
// rollback, so it is settled first), the source after the copy, an export
// and import (park and restore), another lane reusing the sequence and the
// checkpoint its prefill takes, and a cut within the rolled-back rows,
// which is refused (llama.cpp would roll back from planes of an older
// decode).
func TestHybridRollbackThenCacheOperationsLeaveThePlainState(t *testing.T) {
	e := openHybrid(t, 2, hybridDraftMax)
	prompt := promptTokens(t, e, 30, "rollback")
	extra := promptTokens(t, e, 5, "next")
	var held []engine.Token
	freshOf := func(prompt []engine.Token) continuation {
		if err := e.Free(5); err != nil {
			t.Fatal(err)
		}
		return continueLogprobs(t, e, 5, prompt, 0)
	}
	fresh := func() continuation { return freshOf(slices.Concat(held, extra)) }

	// A copy, then the copy and its source continue.
	held = rejectedDrafts(t, e, 0, prompt, 5, 3)
	want := fresh()
	settled := e.RollbacksSettled()
	if err := e.CopyPrefix(0, 1, len(held)); err != nil {
		t.Fatal(err)
	}
	if e.RollbacksSettled() != settled+1 {
		t.Fatalf("the copy settled %d rollbacks, want 1 (none was pending?)", e.RollbacksSettled()-settled)
	}
	sameContinuation(t, "the copy", continueLogprobs(t, e, 1, slices.Concat(held, extra), len(held)), want)
	sameContinuation(t, "the copy's source", continueLogprobs(t, e, 0, slices.Concat(held, extra), len(held)), want)

	// Park and restore: export, free, import elsewhere.
	held = rejectedDrafts(t, e, 0, prompt, 4, 2)
	want = fresh()
	blob, err := e.Export(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Free(0); err != nil {
		t.Fatal(err)
	}
	if n, err := e.Import(2, blob); err != nil || n != len(held) {
		t.Fatalf("import: %d tokens, %v; want %d", n, err, len(held))
	}
	sameContinuation(t, "the parked and restored sequence", continueLogprobs(t, e, 2, slices.Concat(held, extra), len(held)), want)

	// A cut inside the last decode's rows is refused; the sequence is
	// untouched by the refusal.
	held = rejectedDrafts(t, e, 0, prompt, 3, hybridDraftMax)
	want = fresh()
	if err := e.Truncate(0, len(held)-1); err == nil {
		t.Fatal("a recurrent sequence was cut back outside a draft's verification")
	}
	// Another lane reuses the sequence; its prefill's decode applies the
	// rollback and the checkpoint at its prompt's end is of the plain state.
	sameContinuation(t, "a lane reusing the sequence", continueLogprobs(t, e, 0, slices.Concat(held, extra), len(held)), want)
	cps, err := takeAllCheckpoints(t, e, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cp engine.Checkpoint
	for _, c := range cps {
		if c.Pos == len(held)+len(extra) {
			cp = c
		}
	}
	if cp.Blob == nil {
		t.Fatalf("no checkpoint at the reusing prompt's end %d", len(held)+len(extra))
	}
	if err := e.RestoreCheckpoint(0, cp); err != nil {
		t.Fatal(err)
	}
	longer := slices.Concat(held, extra, promptTokens(t, e, 4, "after"))
	want = freshOf(longer)
	sameContinuation(t, "the checkpoint after the reuse", continueLogprobs(t, e, 0, longer, cp.Pos), want)
}

// A sequence decoded one token at a time has no snapshot of its earlier
// positions: a cut one token back must be refused, not rolled back from a
// plane no decode wrote.
func TestHybridCutWithoutADraftIsRefused(t *testing.T) {
	e := openHybrid(t, 1, hybridDraftMax)
	prompt := promptTokens(t, e, 20, "plain")
	generate(t, e, [][]engine.Token{prompt}, 6, 64, engine.Greedy())
	n := e.SeqLen(0)
	for _, keep := range []int{n - 1, n - hybridDraftMax} {
		if err := e.Truncate(0, keep); err == nil {
			t.Fatalf("a cut from %d to %d succeeded", n, keep)
		}
	}
	if err := e.Truncate(0, n); err != nil {
		t.Fatalf("a cut at the end: %v", err)
	}
	if err := e.Truncate(0, 0); err != nil || e.SeqLen(0) != 0 {
		t.Fatalf("a cut to nothing: %v, %d tokens left", err, e.SeqLen(0))
	}
}

// Drafts from Qwen3.5's own multi-token prediction block (its trunk
// hybrid, the block on a plain KV cache) leave every lane's tokens and
// logprobs exactly as plain decoding gives them, greedy, penalised,
// sampled and with logprobs, the trunk's recurrent state rolled back after
// each rejected draft.
func TestHybridMTPDraftsGiveThePlainTokens(t *testing.T) {
	if !upstreamLlama {
		t.Skip("qwen35 and multi-token prediction need the upstream llama.cpp")
	}
	e, err := Open(Options{ModelPath: archModel(t, "qwen35mtp"), Ctx: 1024, Lanes: 4, Seqs: 6, Batch: 256, Threads: 1, MTP: true, DraftMax: 3})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	d, err := NewMTPDrafter(e, 0)
	if err != nil {
		t.Fatal(err)
	}
	if desc := e.Descriptor(); !desc.Drafts || desc.DraftMax != 3 || desc.MTPBytes <= 0 {
		t.Fatalf("descriptor: drafts %v (%q), max %d, MTP bytes %d", desc.Drafts, desc.DraftsRefused, desc.DraftMax, desc.MTPBytes)
	}
	sampled := engine.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1, PenaltyLastN: 64, Seed: 11}
	penalized := engine.Sampling{TopP: 1, RepeatPenalty: 1.3, FrequencyPenalty: 0.2, PresencePenalty: 0.1, PenaltyLastN: 64}
	lanes := []specLane{
		{prompt: promptTokens(t, e, 20, "greedy"), admit: engine.Admit{MaxTokens: 24, Sampling: engine.Greedy()}},
		{prompt: promptTokens(t, e, 17, "penalties"), admit: engine.Admit{MaxTokens: 24, Sampling: penalized}},
		{prompt: promptTokens(t, e, 25, "sampled"), admit: engine.Admit{MaxTokens: 24, Sampling: sampled}},
		{prompt: promptTokens(t, e, 14, "logprobs"), admit: engine.Admit{MaxTokens: 24, Logprobs: 3, Sampling: engine.Greedy()}},
	}
	plain := runDrafted(t, e, lanes, nil)
	for _, k := range []int{1, 3} {
		drafted := 0
		got := runDrafted(t, e, lanes, mtpDrafts(t, d, lanes, k, &drafted))
		for i := range lanes {
			if !slices.Equal(got.out[i], plain.out[i]) {
				t.Fatalf("k %d lane %d: drafted %v\nplain %v", k, i, got.out[i], plain.out[i])
			}
			for j := range got.lp[i] {
				if math.Abs(float64(got.lp[i][j]-plain.lp[i][j])) > 1e-3 {
					t.Fatalf("k %d lane %d token %d: logprob %v, plain %v", k, i, j, got.lp[i][j], plain.lp[i][j])
				}
			}
			if got.seqLen[i] != plain.seqLen[i] {
				t.Errorf("k %d lane %d: sequence of %d tokens, plain %d", k, i, got.seqLen[i], plain.seqLen[i])
			}
		}
		if want := len(lanes) * 22; drafted < want || got.timings.DraftTokens < uint32(want*k) {
			t.Errorf("k %d: %d drafted steps, %d draft tokens; want at least %d and %d", k, drafted, got.timings.DraftTokens, want, want*k)
		}
		t.Logf("k %d: %d of %d draft tokens accepted", k, got.timings.DraftAccepted, got.timings.DraftTokens)
	}
}
