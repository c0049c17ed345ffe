package cgo

import (
	"math"
	"slices"
	"strings"
	"testing"

	"superfluid/engine"
)

// openMTP opens a tiny synthetic GLM-4.5 (glm4moe) with its multi-token
// prediction block, and the drafter on it.
func openMTP(t *testing.T, lanes int) (*Engine, *MTPDrafter) {
	t.Helper()
	return openMTPArch(t, "glm4moe", lanes)
}

// openMTPArch is openMTP on another architecture with the block (a hybrid,
// qwen35mtp, keeping rollback snapshots for drafts of 3).
func openMTPArch(t *testing.T, arch string, lanes int) (*Engine, *MTPDrafter) {
	t.Helper()
	if !upstreamLlama {
		t.Skip("multi-token prediction needs the current engine")
	}
	e, err := Open(Options{ModelPath: archModel(t, arch), Ctx: 1024, Lanes: lanes, Seqs: lanes + 2, Batch: 256, Threads: 1, MTP: true, DraftMax: 3})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	d, err := NewMTPDrafter(e, 0)
	if err != nil {
		t.Fatal(err)
	}
	return e, d
}

// mtpDrafts drafts k tokens for lane i (runDrafted's lane 300+i) from the
// block, one Draft call per lane and step; drafted counts the lanes'
// steps that got a draft.
func mtpDrafts(t *testing.T, d *MTPDrafter, lanes []specLane, k int, drafted *int) func(i int, out []engine.Token, step int) []engine.Token {
	return func(i int, out []engine.Token, _ int) []engine.Token {
		h := append(slices.Clone(lanes[i].prompt), out...)
		reqs := []engine.DraftRequest{{Lane: uint32(300 + i), History: h, Max: k}}
		if _, err := d.Draft(reqs); err != nil {
			t.Fatalf("lane %d: %v", i, err)
		}
		if len(reqs[0].Draft) > 0 {
			*drafted++
		}
		return slices.Clone(reqs[0].Draft)
	}
}

// Drafts from the model's own multi-token prediction block leave every
// lane's tokens and logprobs exactly as plain decoding gives them —
// greedy, sampled (the positional draw), with penalties and with logprobs
// — while the block drafts at every step after the first.
func TestMTPDraftsGiveThePlainTokens(t *testing.T) {
	e, d := openMTP(t, 4)
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
		// Every lane's every step but its last gets a full draft.
		if want := len(lanes) * 22; drafted < want || got.timings.DraftTokens < uint32(want*k) {
			t.Errorf("k %d: %d drafted steps, %d draft tokens; want at least %d and %d", k, drafted, got.timings.DraftTokens, want, want*k)
		}
	}
}

// The block follows what the sequences keep: after steps whose drafts
// were rejected (its cache cut back each time), it drafts for a lane what
// it drafts when the lane's whole history is prefilled at once; it gives
// back an emptied sequence's cells, and decodes nothing for a lane that
// does not draft. On a hybrid trunk (qwen35mtp) the same holds with each
// rejected draft rolled back out of its recurrent state.
func TestMTPFollowsTheKeptRows(t *testing.T) {
	for _, arch := range []string{"glm4moe", "qwen35mtp"} {
		t.Run(arch, func(t *testing.T) {
			e, d := openMTPArch(t, arch, 1)
			mtpFollowsTheKeptRows(t, e, d)
		})
	}
}

func mtpFollowsTheKeptRows(t *testing.T, e *Engine, d *MTPDrafter) {
	lanes := []specLane{{prompt: promptTokens(t, e, 30, "follow"), admit: engine.Admit{MaxTokens: 12, Sampling: engine.Greedy()}}}
	plain := runDrafted(t, e, lanes, nil)
	history := append(slices.Clone(lanes[0].prompt), plain.out[0][:len(plain.out[0])-1]...)
	drafted := 0
	// draftAfter prefills history[:prefillAt], decodes the rest (with the
	// block's drafts when drafts), and drafts with the last token pending.
	draftAfter := func(prefillAt int, drafts bool) []engine.Token {
		if err := e.Free(0); err != nil {
			t.Fatal(err)
		}
		var p engine.Plan
		p.AddAdmit(engine.Admit{Lane: 300, Seq: 0, MaxTokens: 100, Sampling: engine.Greedy()}, history[:prefillAt], nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: 300, Count: uint32(prefillAt)})
		var last engine.Token
		for step := 0; ; step++ {
			ev, err := e.Tick(&p)
			if err != nil {
				t.Fatal(err)
			}
			p.Reset()
			if len(ev.Tokens) == 0 {
				t.Fatalf("step %d: no token", step)
			}
			last = ev.Tokens[len(ev.Tokens)-1].Token
			n := e.SeqLen(0)
			if n >= len(history) {
				if n != len(history) {
					t.Fatalf("sequence of %d tokens, want %d", n, len(history))
				}
				break
			}
			var dr []engine.Token
			if k := min(3, len(history)-n-1); drafts && k > 0 {
				reqs := []engine.DraftRequest{{Lane: 300, History: append(slices.Clone(history[:n]), last), Max: k}}
				if _, err := d.Draft(reqs); err != nil {
					t.Fatal(err)
				}
				dr = reqs[0].Draft
				if len(dr) > 0 {
					drafted++
				}
			}
			p.AddDraft(300, dr)
		}
		// The block knows the sequence's last state, and caches no more
		// than the sequence (no draft's rows; the kept rows wait for the
		// next draft).
		if fed, cached, err := e.MTPState(0); err != nil || fed != int32(len(history)-1) || cached > fed {
			t.Fatalf("the block knows the state at position %d and caches up to %d (%v); the sequence holds %d", fed, cached, err, len(history))
		}
		reqs := []engine.DraftRequest{{Lane: 300, History: append(slices.Clone(history), last), Max: 3}}
		if _, err := d.Draft(reqs); err != nil {
			t.Fatal(err)
		}
		if fed, cached, err := e.MTPState(0); err != nil || fed != int32(len(history)-1) || cached != fed {
			t.Fatalf("after a draft the block knows position %d and caches up to %d (%v); the sequence holds %d", fed, cached, err, len(history))
		}
		var retire engine.Plan
		retire.Retires = append(retire.Retires, 300)
		if _, err := e.Tick(&retire); err != nil {
			t.Fatal(err)
		}
		return reqs[0].Draft
	}
	whole := draftAfter(len(history), false)
	stepped := draftAfter(len(lanes[0].prompt), true)
	if drafted == 0 {
		t.Fatal("the block drafted nothing on the way")
	}
	if len(whole) != 3 || !slices.Equal(whole, stepped) {
		t.Fatalf("drafts after one prefill %v, after the prompt and %d drafted decodes %v", whole, len(history)-len(lanes[0].prompt), stepped)
	}
	// The engine's sequence emptied, the block gives its cells back at
	// the next step (another sequence's).
	if err := e.Free(0); err != nil {
		t.Fatal(err)
	}
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 301, Seq: 1, MaxTokens: 1, Sampling: engine.Greedy()}, history[:4], nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 301, Count: 4})
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	if fed, cached, err := e.MTPState(0); err != nil || fed != -1 || cached != -1 {
		t.Fatalf("after its sequence was emptied the block holds fed %d, cached %d (%v)", fed, cached, err)
	}
	// A lane that has not drafted cost the block no decode: its rows wait.
	if fed, cached, err := e.MTPState(1); err != nil || fed != 3 || cached != -1 {
		t.Fatalf("the other sequence: state at %d, cached up to %d (%v), want 3 and none", fed, cached, err)
	}
}

// A model without multi-token prediction layers is refused by name, and
// the drafter on an engine opened without them drafts nothing but an
// error.
func TestMTPRefusedWithoutItsLayers(t *testing.T) {
	_, err := Open(Options{ModelPath: tinyModel(t), Ctx: 256, Lanes: 1, Seqs: 1, Threads: 1, MTP: true})
	if err == nil || !strings.Contains(err.Error(), "multi-token prediction") {
		t.Fatalf("a llama model opened with MTP: %v", err)
	}
	e := openTest(t, 1)
	d, err := NewMTPDrafter(e, 0)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []engine.DraftRequest{{Lane: 1, History: []engine.Token{1, 2, 3}, Max: 2}}
	if _, err := d.Draft(reqs); err == nil || len(reqs[0].Draft) != 0 {
		t.Fatalf("an engine without the block drafted %v, err %v", reqs[0].Draft, err)
	}
	if _, err := NewMTPDrafter(e, 2); err == nil {
		t.Fatal("a minimum probability of 2 was taken")
	}
}

// The block's own KV cache is memory the model holds: the descriptor
// counts it for an engine opened with the block, and not without.
func TestMTPBlockMemoryIsCounted(t *testing.T) {
	e, _ := openMTP(t, 2)
	with := e.Descriptor()
	plain, err := Open(Options{ModelPath: archModel(t, "glm4moe"), Ctx: 1024, Lanes: 2, Seqs: 4, Batch: 256, Threads: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer plain.Close()
	without := plain.Descriptor()
	// One layer of the block against the trunk's: more than nothing, less
	// than the trunk's whole cache.
	trunk := without.KVBytesPerToken * int64(without.Ctx)
	if without.MTPBytes != 0 || with.MTPBytes <= 0 || with.MTPBytes >= trunk {
		t.Fatalf("block cache %d bytes with the block, %d without; the trunk's %d", with.MTPBytes, without.MTPBytes, trunk)
	}
}
