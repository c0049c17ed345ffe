package cgo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"superfluid/engine"
)

// openTest opens the tiny test model with room for lanes.
func openTest(t testing.TB, lanes int) *Engine {
	t.Helper()
	e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 1024, Lanes: lanes, Seqs: lanes + 4, Batch: 256, Threads: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// promptTokens returns a deterministic prompt of n tokens made of ordinary
// text tokens.
func promptTokens(t testing.TB, e *Engine, n int, salt string) []engine.Token {
	t.Helper()
	text := "The quick brown fox " + salt + " jumps over the lazy dog while the compiler builds the engine. "
	var out []engine.Token
	for len(out) < n {
		toks, err := e.Tokenize(text, false, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, toks...)
	}
	return out[:n]
}

// generate runs lanes to completion through ticks: each prompt prefilled in
// chunks of at most chunk tokens, then decoded one token per tick. It
// returns each lane's tokens; lanes are retired when they finish.
func generate(t testing.TB, e *Engine, prompts [][]engine.Token, maxTokens, chunk int, s engine.Sampling) [][]engine.Token {
	t.Helper()
	const base = 100
	var p engine.Plan
	out := make([][]engine.Token, len(prompts))
	prefilled := make([]int, len(prompts))
	done := make([]bool, len(prompts))
	for i, pr := range prompts {
		if err := e.Free(int32(i)); err != nil {
			t.Fatal(err)
		}
		p.AddAdmit(engine.Admit{Lane: uint32(base + i), Seq: int32(i), MaxTokens: uint32(maxTokens), Sampling: s}, pr, nil)
	}
	for {
		for i := range prompts {
			lane := uint32(base + i)
			switch {
			case done[i]:
			case prefilled[i] < len(prompts[i]):
				n := min(chunk, len(prompts[i])-prefilled[i])
				p.Prefills = append(p.Prefills, engine.Prefill{Lane: lane, Offset: uint32(prefilled[i]), Count: uint32(n)})
				prefilled[i] += n
			default:
				p.Decodes = append(p.Decodes, engine.Decode{Lane: lane})
			}
		}
		if p.Empty() {
			return out
		}
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatalf("tick: %v", err)
		}
		p.Reset()
		for _, te := range ev.Tokens {
			i := int(te.Lane - base)
			out[i] = append(out[i], te.Token)
			if te.Finish != engine.FinishNone {
				done[i] = true
				p.Retires = append(p.Retires, te.Lane)
			}
		}
	}
}

func TestOpenReportsDescriptor(t *testing.T) {
	e := openTest(t, 2)
	d := e.Descriptor()
	if d.Architecture != "llama" || d.Vocab <= 0 || d.Ctx != 1024 || d.KVBytesPerToken <= 0 || len(d.EOG) == 0 {
		t.Fatalf("descriptor: %+v", d)
	}
	if d.Identity == "" || !d.PartialTruncation || !d.Drafts {
		t.Fatalf("descriptor identity/truncation: %+v", d)
	}
}

// The descriptor reports the batch and micro-batch as llama.cpp clamps
// them: the batch to the context, the micro-batch to the batch; by default
// a micro-batch of DefaultUBatch under a batch of DefaultBatch.
func TestOpenReportsBatchAndMicroBatch(t *testing.T) {
	for _, c := range []struct {
		ctx, batch, ubatch int
		wantB, wantU       int
	}{
		{4096, 0, 0, DefaultBatch, DefaultUBatch},
		{1024, 0, 0, 1024, DefaultUBatch},
		{1024, 256, 0, 256, 256},
		{4096, 2048, 1024, 2048, 1024},
		{4096, 128, 512, 128, 128},
	} {
		e, err := Open(Options{ModelPath: tinyModel(t), Ctx: c.ctx, Lanes: 1, Seqs: 1, Batch: c.batch, UBatch: c.ubatch, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		d := e.Descriptor()
		if d.Batch != c.wantB || d.UBatch != c.wantU {
			t.Errorf("ctx %d, batch %d, ubatch %d: descriptor batch %d, ubatch %d; want %d, %d", c.ctx, c.batch, c.ubatch, d.Batch, d.UBatch, c.wantB, c.wantU)
		}
		e.Close()
	}
}

func TestOpenRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "x.gguf")
	os.WriteFile(notGGUF, []byte("this is not a model file at all"), 0o644)
	for _, path := range []string{filepath.Join(dir, "missing.gguf"), notGGUF} {
		if _, err := Open(Options{ModelPath: path}); err == nil {
			t.Errorf("open %s: no error", path)
		}
	}
	if _, err := Open(Options{ModelPath: tinyModel(t), CacheTypeK: "q2"}); err == nil {
		t.Error("unknown KV type accepted")
	}
}

func TestMalformedTicksReturnStatus(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 8, "a")
	admit := func(p *engine.Plan, lane uint32, seq int32) {
		p.AddAdmit(engine.Admit{Lane: lane, Seq: seq, Sampling: engine.Greedy()}, prompt, nil)
	}
	cases := []struct {
		name string
		plan func(p *engine.Plan)
		want error
		lane int // the lane the error blames; -1: the whole plan
	}{
		{"retire unknown lane", func(p *engine.Plan) { p.Retires = append(p.Retires, 9) }, engine.ErrUnknownLane, 9},
		{"prefill unknown lane", func(p *engine.Plan) {
			p.Prefills = append(p.Prefills, engine.Prefill{Lane: 9, Offset: 0, Count: 1})
		}, engine.ErrUnknownLane, 9},
		{"decode unknown lane", func(p *engine.Plan) { p.Decodes = append(p.Decodes, engine.Decode{Lane: 9}) }, engine.ErrUnknownLane, 9},
		{"sequence out of range", func(p *engine.Plan) { admit(p, 1, 99) }, engine.ErrSeqRange, 1},
		{"negative sequence", func(p *engine.Plan) { admit(p, 1, -1) }, engine.ErrSeqRange, 1},
		{"prefill past the prompt", func(p *engine.Plan) {
			admit(p, 1, 0)
			p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Offset: 0, Count: 9})
		}, engine.ErrPastPrompt, 1},
		{"prompt longer than the context", func(p *engine.Plan) {
			p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Sampling: engine.Greedy()}, make([]engine.Token, 1025), nil)
		}, engine.ErrContext, 1},
		{"token outside the vocabulary", func(p *engine.Plan) {
			p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Sampling: engine.Greedy()}, []engine.Token{1, 1 << 30}, nil)
		}, engine.ErrInvalid, 1},
		{"cached tokens the sequence lacks", func(p *engine.Plan) {
			p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Cached: 4, Sampling: engine.Greedy()}, prompt, nil)
		}, engine.ErrInvalid, 1},
		{"two lanes on one sequence", func(p *engine.Plan) { admit(p, 1, 0); admit(p, 2, 0) }, engine.ErrSeqBusy, 2},
		{"too many logprobs", func(p *engine.Plan) {
			p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Logprobs: 99, Sampling: engine.Greedy()}, prompt, nil)
		}, engine.ErrInvalid, 1},
		{"decode before prefill", func(p *engine.Plan) {
			admit(p, 1, 0)
			p.Decodes = append(p.Decodes, engine.Decode{Lane: 1})
		}, engine.ErrInvalid, 1},
		{"more lanes than the engine", func(p *engine.Plan) { admit(p, 1, 0); admit(p, 2, 1); admit(p, 3, 2) }, engine.ErrInvalid, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p engine.Plan
			c.plan(&p)
			_, err := e.Tick(&p)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var ee *engine.Error
			if !errors.As(err, &ee) || ee.Msg == "" {
				t.Fatalf("no message: %#v", err)
			}
			lane, blamed := engine.FaultLane(err)
			if c.lane < 0 && blamed || c.lane >= 0 && (!blamed || lane != uint32(c.lane)) {
				t.Fatalf("blames lane %d (%v), want %d", lane, blamed, c.lane)
			}
		})
	}
	// The engine still works after all of that.
	out := generate(t, e, [][]engine.Token{prompt}, 4, 8, engine.Greedy())
	if len(out[0]) != 4 {
		t.Fatalf("generated %d tokens after bad plans", len(out[0]))
	}
}

func TestSequencePrimitivesRejectBadCalls(t *testing.T) {
	e := openTest(t, 2)
	if err := e.CopyPrefix(0, 99, 1); !errors.Is(err, engine.ErrSeqRange) {
		t.Errorf("copy to 99: %v", err)
	}
	if err := e.CopyPrefix(0, 1, 5); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("copy of tokens the source lacks: %v", err)
	}
	if err := e.Truncate(-3, 0); !errors.Is(err, engine.ErrSeqRange) {
		t.Errorf("truncate -3: %v", err)
	}
	if err := e.Free(1 << 20); !errors.Is(err, engine.ErrSeqRange) {
		t.Errorf("free: %v", err)
	}
	for _, junk := range [][]byte{nil, []byte("garbage"), make([]byte, 4096)} {
		if _, err := e.Import(0, junk); !errors.Is(err, engine.ErrState) {
			t.Errorf("import of %d junk bytes: %v", len(junk), err)
		}
	}
}

// runToEnd ticks p, then steps its lanes' decodes until every lane it
// touched has finished, and returns what all those steps sampled as one
// Events (Top offsets rebased, Lanes as they stand at the end, Timings
// summed): the whole of what the plan's lanes produce.
func runToEnd(e *Engine, p *engine.Plan) (*engine.Events, error) {
	var all engine.Events
	lanes := map[uint32]int{} // lane -> index in all.Lanes
	for {
		ev, err := e.Tick(p)
		if err != nil {
			return &all, err
		}
		for _, te := range ev.Tokens {
			top := ev.TopOf(&te)
			te.TopOff, te.TopLen = uint32(len(all.Top)), uint32(len(top))
			all.Top = append(all.Top, top...)
			all.Tokens = append(all.Tokens, te)
		}
		all.Timings.StepNS += ev.Timings.StepNS
		all.Timings.PrefillTokens += ev.Timings.PrefillTokens
		all.Timings.DecodeTokens += ev.Timings.DecodeTokens
		all.Timings.GrammarFast += ev.Timings.GrammarFast
		all.Timings.GrammarMasked += ev.Timings.GrammarMasked
		next := engine.Plan{}
		for _, le := range ev.Lanes {
			if i, ok := lanes[le.Lane]; ok {
				all.Lanes[i] = le
			} else {
				lanes[le.Lane] = len(all.Lanes)
				all.Lanes = append(all.Lanes, le)
			}
			if le.Finish == engine.FinishNone && le.Generated > 0 { // prefilled, not done
				next.Decodes = append(next.Decodes, engine.Decode{Lane: le.Lane})
			}
		}
		if len(next.Decodes) == 0 {
			return &all, nil
		}
		p = &next
	}
}
