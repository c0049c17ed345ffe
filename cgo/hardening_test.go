package cgo

import (
	"errors"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"superfluid/engine"
	"superfluid/gguf"
	"superfluid/synth"
)

// sampled is seeded sampling with every truncation sampler and penalties on.
func sampled(seed uint64) engine.Sampling {
	return engine.Sampling{Temperature: 1, TopK: 40, TopP: 0.95, MinP: 0.01, RepeatPenalty: 1.1, PenaltyLastN: 64, Seed: seed}
}

// admitOne is a plan admitting lane on seq 0 with the whole prompt
// prefilled and at most rounds tokens to generate (runToEnd decodes them).
func admitOne(e *Engine, lane uint32, prompt []engine.Token, bias []engine.LogitBias, s engine.Sampling, rounds int) *engine.Plan {
	var p engine.Plan
	e.Free(0)
	p.AddAdmit(engine.Admit{Lane: lane, Seq: 0, MaxTokens: uint32(rounds), Sampling: s}, prompt, bias)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: lane, Count: uint32(len(prompt))})
	return &p
}

func tokensOf(ev *engine.Events) []engine.Token {
	var out []engine.Token
	for _, te := range ev.Tokens {
		out = append(out, te.Token)
	}
	return out
}

// retire ends a lane admitted by admitOne.
func retire(t *testing.T, e *Engine, lane uint32) {
	t.Helper()
	if _, err := e.Tick(&engine.Plan{Retires: []uint32{lane}}); err != nil {
		t.Fatalf("retire %d: %v", lane, err)
	}
}

// A denormal temperature made the logits ±inf and llama.cpp's dist sampler
// abort the process; below engine.MinTemperature a lane is greedy.
func TestTinyTemperaturesAreGreedy(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 8, "denormal")
	greedy := generate(t, e, [][]engine.Token{prompt}, 8, 64, engine.Greedy())[0]
	for _, temp := range []float32{1e-40, 1e-6, -3, float32(math.NaN())} {
		s := sampled(1)
		s.Temperature = temp
		got := generate(t, e, [][]engine.Token{prompt}, 8, 64, s)[0]
		if !slices.Equal(got, greedy) {
			t.Errorf("temperature %g: %v, greedy %v", temp, got, greedy)
		}
	}
}

// A bias banning every token left dist nothing to find (abort at any
// temperature above 0); it is refused, blaming the lane, and changes nothing.
func TestBiasBanningEveryTokenIsRefused(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 8, "banned")
	bias := make([]engine.LogitBias, e.Descriptor().Vocab)
	for i := range bias {
		bias[i] = engine.LogitBias{Token: engine.Token(i), Bias: float32(math.Inf(-1))}
	}
	if !engine.BansEveryToken(bias, e.Descriptor().Vocab) {
		t.Fatal("engine.BansEveryToken disagrees about the bias")
	}
	for _, temp := range []float32{0.8, 0} {
		s := sampled(3)
		s.Temperature = temp
		_, err := runToEnd(e, admitOne(e, 1, prompt, bias, s, 4))
		if lane, ok := engine.FaultLane(err); !errors.Is(err, engine.ErrInvalid) || !ok || lane != 1 {
			t.Fatalf("temperature %g: %v (blames %d: %v)", temp, err, lane, ok)
		}
	}
	// All but one token banned: that one is all the lane can say.
	keep := prompt[2]
	bias = slices.DeleteFunc(bias, func(b engine.LogitBias) bool { return b.Token == keep })
	ev, err := runToEnd(e, admitOne(e, 1, prompt, bias, sampled(3), 4))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range tokensOf(ev) {
		if tok != keep {
			t.Fatalf("sampled %d past a ban, want only %d: %v", tok, keep, tokensOf(ev))
		}
	}
	retire(t, e, 1)
}

// +inf (and absurdly large) biases are clamped: the token is forced,
// without inf - inf reaching the sampler.
func TestHugeBiasForcesItsToken(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 8, "forced")
	want := prompt[5]
	for _, b := range []float32{float32(math.Inf(1)), 3e38, 1e7} {
		for _, s := range []engine.Sampling{sampled(5), engine.Greedy()} {
			ev, err := runToEnd(e, admitOne(e, 1, prompt, []engine.LogitBias{{Token: want, Bias: b}}, s, 5))
			if err != nil {
				t.Fatalf("bias %g: %v", b, err)
			}
			got := tokensOf(ev)
			if len(got) != 5 || slices.ContainsFunc(got, func(tok engine.Token) bool { return tok != want }) {
				t.Fatalf("bias %g, temperature %g: %v, want only %d", b, s.Temperature, got, want)
			}
			retire(t, e, 1)
		}
	}
}

// Values the sampler chain cannot survive are refused by the engine,
// naming the lane; a huge penalty window is clamped to the context instead
// of allocating a ring of that size.
func TestAbsurdSamplingIsRefused(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 8, "absurd")
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := map[string]func(s *engine.Sampling){
		"top_p 0":              func(s *engine.Sampling) { s.TopP = 0 },
		"top_p 1.5":            func(s *engine.Sampling) { s.TopP = 1.5 },
		"top_p NaN":            func(s *engine.Sampling) { s.TopP = nan },
		"min_p 2":              func(s *engine.Sampling) { s.MinP = 2 },
		"top_k -1":             func(s *engine.Sampling) { s.TopK = -1 },
		"repeat penalty 0":     func(s *engine.Sampling) { s.RepeatPenalty = 0 },
		"repeat penalty inf":   func(s *engine.Sampling) { s.RepeatPenalty = inf },
		"frequency 1e7":        func(s *engine.Sampling) { s.FrequencyPenalty = -1e7 },
		"presence inf":         func(s *engine.Sampling) { s.PresencePenalty = inf },
		"temperature inf":      func(s *engine.Sampling) { s.Temperature = inf },
		"penalty window -2":    func(s *engine.Sampling) { s.PenaltyLastN = -2 },
		"greedy with top_p -1": func(s *engine.Sampling) { s.Temperature = 0; s.TopP = -1 },
	}
	for name, mutate := range cases {
		s := sampled(7)
		mutate(&s)
		_, err := runToEnd(e, admitOne(e, 4, prompt, nil, s, 2))
		if lane, ok := engine.FaultLane(err); !errors.Is(err, engine.ErrInvalid) || !ok || lane != 4 {
			t.Errorf("%s: %v (blames %d: %v)", name, err, lane, ok)
		}
	}
	s := sampled(7)
	s.PenaltyLastN = math.MaxInt32
	s.FrequencyPenalty, s.PresencePenalty = 1e6, -1e6
	ev, err := runToEnd(e, admitOne(e, 4, prompt, nil, s, 3))
	if err != nil || len(ev.Tokens) != 3 {
		t.Fatalf("a whole-context penalty window: %v, %d tokens", err, len(ev.Tokens))
	}
	retire(t, e, 4)
}

// A plan refused for its second admission admits neither: the first lane
// and its sequence are as free as before.
func TestRefusedPlanChangesNothing(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 8, "atomic")
	e.Free(0)
	e.Free(1)
	bad := sampled(1)
	bad.TopP = 7
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: 2, Sampling: engine.Greedy()}, prompt, nil)
	p.AddAdmit(engine.Admit{Lane: 2, Seq: 1, MaxTokens: 2, Sampling: bad}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: 8}, engine.Prefill{Lane: 2, Count: 8})
	_, err := e.Tick(&p)
	if lane, ok := engine.FaultLane(err); !errors.Is(err, engine.ErrInvalid) || !ok || lane != 2 {
		t.Fatalf("plan with a bad second admission: %v (blames %d: %v)", err, lane, ok)
	}
	if e.SeqLen(0) != 0 {
		t.Fatalf("the refused plan left %d tokens in sequence 0", e.SeqLen(0))
	}
	// Lane 1 was not admitted: retiring it is refused, admitting it works.
	if _, err := e.Tick(&engine.Plan{Retires: []uint32{1}}); !errors.Is(err, engine.ErrUnknownLane) {
		t.Fatalf("retire of the refused plan's lane: %v", err)
	}
	p.Reset()
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: 2, Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: 8})
	if _, err := e.Tick(&p); err != nil {
		t.Fatalf("the same admission alone: %v", err)
	}
	retire(t, e, 1)
}

// A C++ exception inside a tick becomes a status, not a terminated process,
// and the refused plan can run afterwards.
func TestExceptionInTickIsAStatus(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 8, "throw")
	e.injectTickException()
	_, err := runToEnd(e, admitOne(e, 1, prompt, nil, sampled(2), 3))
	if !errors.Is(err, engine.ErrException) || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("tick with an injected bad_alloc: %v", err)
	}
	if _, ok := engine.FaultLane(err); ok {
		t.Fatalf("an exception blames a lane: %v", err)
	}
	ev, err := runToEnd(e, admitOne(e, 1, prompt, nil, sampled(2), 3))
	if err != nil || len(ev.Tokens) != 3 {
		t.Fatalf("the plan after the exception: %v, %d tokens", err, len(ev.Tokens))
	}
	retire(t, e, 1)
}

func TestExceptionInTokenizeIsAnError(t *testing.T) {
	e := openTest(t, 1)
	e.injectTokenizeException()
	_, err := e.Tokenize("hello world", false, false)
	if !errors.Is(err, engine.ErrException) || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("tokenize with an injected exception: %v", err)
	}
	if toks, err := e.Tokenize("hello world", false, false); err != nil || len(toks) == 0 {
		t.Fatalf("tokenize after: %v, %v", toks, err)
	}
}

// Text calls racing Close either finish before the vocabulary is freed or
// find the engine closed. Run under -race.
func TestTextCallsAfterCloseAreSafe(t *testing.T) {
	e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 256, Lanes: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := e.Tokenize("The quick brown fox", false, false)
	if err != nil {
		t.Fatal(err)
	}
	const workers = 4
	var started, done sync.WaitGroup
	started.Add(workers)
	done.Add(workers)
	for w := range workers {
		go func() {
			defer done.Done()
			first := true
			for {
				_, terr := e.Tokenize("The quick brown fox", false, false)
				piece := e.AppendPiece(nil, toks[w%len(toks)], true)
				text := e.Detokenize(toks, false)
				_ = e.RepackedBytes() // under textMu too: 0 once closed
				if first {
					started.Done()
					first = false
				}
				if terr != nil {
					if !errors.Is(terr, engine.ErrClosed) {
						t.Errorf("tokenize: %v", terr)
					}
					return
				}
				if len(piece) == 0 || text == "" {
					// Close happened between the calls: later ones must say so.
					if _, err := e.Tokenize("x", false, false); !errors.Is(err, engine.ErrClosed) {
						t.Errorf("an empty piece or text while open: %q %q (%v)", piece, text, err)
					}
					return
				}
			}
		}()
	}
	started.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	done.Wait()
	if _, err := e.Tokenize("after", false, false); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("tokenize after close: %v", err)
	}
	if got := e.AppendPiece([]byte("kept"), toks[0], true); string(got) != "kept" {
		t.Fatalf("append piece after close: %q", got)
	}
	if got := e.Detokenize(toks, true); got != "" {
		t.Fatalf("detokenize after close: %q", got)
	}
	if _, err := e.ApplyChatTemplate([]Message{{Role: "user", Content: "hi"}}, true, "chatml"); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("chat template after close: %v", err)
	}
	if _, err := e.Tick(&engine.Plan{}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("tick after close: %v", err)
	}
}

// A seeded lane's draw depends on the position, not on how many draws came
// before: re-admitted with its reply so far appended to the prompt (what a
// preemption does), it continues exactly as it would have.
func TestSeededSamplingIsKeyedByPosition(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 10, "resume")
	// A hot temperature over the whole vocabulary, so every draw matters.
	s := engine.Sampling{Temperature: 3, TopP: 1, RepeatPenalty: 1.1, PenaltyLastN: 64, Seed: 1234}
	const n, k = 24, 9
	whole := generate(t, e, [][]engine.Token{prompt}, n, 64, s)[0]
	if len(whole) != n {
		t.Fatalf("generated %d tokens, want %d", len(whole), n)
	}
	resume := append(slices.Clone(prompt), whole[:k]...)
	resumed := generate(t, e, [][]engine.Token{resume}, n-k, 64, s)[0]
	if !slices.Equal(resumed, whole[k:]) {
		t.Fatalf("resumed after %d tokens:\n%v\nwant\n%v", k, resumed, whole[k:])
	}
	// The continuation is the seed's: another seed, or greedy, says otherwise.
	other := s
	other.Seed++
	if got := generate(t, e, [][]engine.Token{resume}, n-k, 64, other)[0]; slices.Equal(got, whole[k:]) {
		t.Fatalf("seed %d continues like seed %d: the test proves nothing", other.Seed, s.Seed)
	}
	if got := generate(t, e, [][]engine.Token{resume}, n-k, 64, engine.Greedy())[0]; slices.Equal(got, whole[k:]) {
		t.Fatal("the seeded continuation is the greedy one: the test proves nothing")
	}
}

// Text that cannot fit the context is refused before tokenizing.
func TestTokenizeRefusesTextBeyondTheContext(t *testing.T) {
	e := openTest(t, 1)
	limit := e.MaxTextBytes()
	if limit < e.Descriptor().Ctx {
		t.Fatalf("MaxTextBytes %d below the context of %d tokens", limit, e.Descriptor().Ctx)
	}
	_, err := e.Tokenize(strings.Repeat("a", limit+1), false, false)
	if !errors.Is(err, engine.ErrContext) {
		t.Fatalf("tokenize of %d bytes: %v", limit+1, err)
	}
	if _, err := e.Tokenize(strings.Repeat("ab ", 100), false, false); err != nil {
		t.Fatal(err)
	}
}

// recommendedModel writes the tiny model with general.sampling.* keys.
func recommendedModel(t *testing.T, name string, kv map[string]any) string {
	t.Helper()
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	var meta []gguf.KV
	for _, key := range slices.Sorted(maps.Keys(kv)) {
		v, err := gguf.ValueOf(kv[key])
		if err != nil {
			t.Fatal(err)
		}
		meta = append(meta, gguf.KV{Key: key, Value: v})
	}
	path := filepath.Join(t.TempDir(), name+".gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "f16", Seed: 7, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRecommendedSamplingFromTheModel(t *testing.T) {
	cases := []struct {
		name string
		kv   map[string]any
		want engine.ModelSampling
	}{
		{"none", nil, engine.ModelSampling{}},
		{"all", map[string]any{"general.sampling.top_k": int32(20), "general.sampling.top_p": float32(0.8), "general.sampling.min_p": float32(0.1)},
			engine.ModelSampling{TopK: 20, TopP: 0.8, MinP: 0.1, HasTopK: true, HasTopP: true, HasMinP: true}},
		{"top_p only", map[string]any{"general.sampling.top_p": float32(0.9)}, engine.ModelSampling{TopP: 0.9, HasTopP: true}},
		{"nonsense ignored", map[string]any{"general.sampling.top_k": int32(-3), "general.sampling.top_p": float32(5), "general.sampling.min_p": "high"},
			engine.ModelSampling{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := Open(Options{ModelPath: recommendedModel(t, strings.ReplaceAll(c.name, " ", "-"), c.kv), Ctx: 128, Lanes: 1, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got := e.Descriptor().Recommended; got != c.want {
				t.Fatalf("recommended %+v, want %+v", got, c.want)
			}
			k, p, m := e.Descriptor().SamplingDefaults()
			if c.want.HasTopK && k != c.want.TopK || c.want.HasTopP && p != c.want.TopP || !c.want.HasTopK && k != engine.DefaultTopK {
				t.Fatalf("defaults %d %g %g", k, p, m)
			}
		})
	}
}

// Invalid UTF-8, NUL bytes and special-token text tokenize without a crash.
func TestTokenizeHostileText(t *testing.T) {
	e := openTest(t, 1)
	for _, text := range []string{"\xff\xfe\xfd", "a\x00b", "<|im_start|><|im_end|>", "\xc3", strings.Repeat("\U0010ffff", 50)} {
		for _, special := range []bool{false, true} {
			toks, err := e.Tokenize(text, special, special)
			if err != nil {
				t.Errorf("tokenize %q: %v", text, err)
				continue
			}
			_ = e.Detokenize(toks, special)
		}
	}
}
