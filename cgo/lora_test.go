package cgo

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/synth"
)

// loraAdapter writes (once) a synthetic adapter for the tiny llama model.
func loraAdapter(t testing.TB, arch string, seed uint64) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := "lora:" + arch + ":" + string(rune('0'+seed))
	if p, ok := modelMemo[key]; ok {
		return p
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "lora-"+arch+"-"+string(rune('0'+seed))+".gguf")
	if err := synth.WriteLoRA(path, synth.LoRAOptions{Shape: shape, Arch: arch, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// greedyUnder runs one greedy lane to n tokens with every step under the
// adapter scales lora.
func greedyUnder(t *testing.T, e *Engine, prompt []engine.Token, n int, lora []float32) []engine.Token {
	t.Helper()
	if err := e.Free(0); err != nil {
		t.Fatal(err)
	}
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: uint32(n), Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: uint32(len(prompt))})
	var out []engine.Token
	for {
		p.LoRA = append(p.LoRA, lora...)
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatalf("tick: %v", err)
		}
		p.Reset()
		finished := false
		for _, te := range ev.Tokens {
			out = append(out, te.Token)
			finished = finished || te.Finish != engine.FinishNone
		}
		if finished {
			p.Retires = append(p.Retires, 1)
			if _, err := e.Tick(&p); err != nil {
				t.Fatal(err)
			}
			return out
		}
		p.Decodes = append(p.Decodes, engine.Decode{Lane: 1})
	}
}

// An adapter at scale 0 leaves the base model's greedy output as it is; at
// scale 1 it changes it; the scales switch per step, so one engine gives
// both, in any order. Two adapters are told apart.
func TestLoRAScales(t *testing.T) {
	base, err := Open(Options{ModelPath: tinyModel(t), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1,
		LoRA: []string{loraAdapter(t, "llama", 1), loraAdapter(t, "llama", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Descriptor().LoRA != 2 {
		t.Fatalf("descriptor LoRA %d, want 2", e.Descriptor().LoRA)
	}
	prompt := promptTokens(t, base, 24, "lora")
	want := greedyUnder(t, base, prompt, 24, nil)
	if got := greedyUnder(t, e, prompt, 24, []float32{0, 0}); !slices.Equal(got, want) {
		t.Errorf("scale 0: %v\nbase:    %v", got, want)
	}
	if got := greedyUnder(t, e, prompt, 24, nil); !slices.Equal(got, want) {
		t.Errorf("no scales: %v\nbase:      %v", got, want)
	}
	first := greedyUnder(t, e, prompt, 24, []float32{1, 0})
	second := greedyUnder(t, e, prompt, 24, []float32{0, 1})
	if slices.Equal(first, want) || slices.Equal(second, want) || slices.Equal(first, second) {
		t.Errorf("adapters change nothing:\nbase   %v\nfirst  %v\nsecond %v", want, first, second)
	}
	// Back to no adapter, then the first again: each as before.
	if got := greedyUnder(t, e, prompt, 24, []float32{0, 0}); !slices.Equal(got, want) {
		t.Errorf("scale 0 after scale 1: %v", got)
	}
	if got := greedyUnder(t, e, prompt, 24, []float32{1, 0}); !slices.Equal(got, first) {
		t.Errorf("first adapter again: %v, was %v", got, first)
	}
}

// Scales a request could send that would poison the step are refused
// before llama.cpp sees them, and the engine keeps serving.
func TestLoRAScalesRefused(t *testing.T) {
	e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1, LoRA: []string{loraAdapter(t, "llama", 1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, bad := range [][]float32{{float32(math.NaN())}, {float32(math.Inf(1))}, {1000}, {1, 1}} {
		p := engine.Plan{LoRA: bad}
		p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: 4, Sampling: engine.Greedy()}, []engine.Token{1, 2, 3}, nil)
		_, err := e.Tick(&p)
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Status != engine.StatusInvalid {
			t.Errorf("scales %v: %v, want a refusal", bad, err)
		}
		if err := engine.CheckLoRAScales(bad, 1); err == nil {
			t.Errorf("scales %v: engine.CheckLoRAScales accepts them", bad)
		}
	}
	prompt := promptTokens(t, e, 8, "after")
	if got := greedyUnder(t, e, prompt, 4, []float32{1}); len(got) != 4 {
		t.Errorf("after refusals: %v", got)
	}
}

// An adapter for another architecture, or not an adapter at all, is
// refused at open with a message naming it.
func TestLoRAWrongAdapterRefused(t *testing.T) {
	for _, path := range []string{loraAdapter(t, "qwen3", 1), tinyModel(t), filepath.Join(modelDir, "missing.gguf")} {
		e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1, LoRA: []string{path}})
		if err == nil {
			e.Close()
			t.Errorf("%s accepted as an adapter", path)
			continue
		}
		if !strings.Contains(err.Error(), "LoRA") {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// BenchmarkLoRASwitch is one lane's decode step under an unchanged adapter
// set (same) against steps that switch between two sets (switch: llama.cpp
// reserves its graph again on every change). Compare their ns/op.
func BenchmarkLoRASwitch(b *testing.B) {
	for _, mode := range []string{"same", "switch"} {
		b.Run(mode, func(b *testing.B) {
			e, err := Open(Options{ModelPath: tinyModel(b), Ctx: 4096, Lanes: 1, Seqs: 1, Threads: 1,
				LoRA: []string{loraAdapter(b, "llama", 1), loraAdapter(b, "llama", 2)}})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			sets := [][]float32{{1, 0}, {0, 1}}
			var p engine.Plan
			p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Sampling: engine.Greedy()}, []engine.Token{1, 2, 3, 4}, nil)
			p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: 4})
			p.LoRA = append(p.LoRA, sets[0]...)
			if _, err := e.Tick(&p); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				p.Reset()
				p.Decodes = append(p.Decodes, engine.Decode{Lane: 1})
				set := sets[0]
				if mode == "switch" {
					set = sets[(i+1)%2]
				}
				p.LoRA = append(p.LoRA, set...)
				if _, err := e.Tick(&p); err != nil {
					b.Fatal(err)
				}
				if i%2000 == 1999 { // stay within the context
					b.StopTimer()
					p.Reset()
					p.Retires = append(p.Retires, 1)
					if _, err := e.Tick(&p); err != nil {
						b.Fatal(err)
					}
					_ = e.Free(0)
					p.Reset()
					p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Sampling: engine.Greedy()}, []engine.Token{1, 2, 3, 4}, nil)
					p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: 4})
					p.LoRA = append(p.LoRA, sets[0]...)
					if _, err := e.Tick(&p); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// The descriptor names each adapter by its whole file's sha256: what an
// adapter set's name (engine.AdapterSetOf), and so its parked streams,
// are keyed by across restarts.
func TestLoRAIdentityIsTheFilesDigest(t *testing.T) {
	paths := []string{loraAdapter(t, "llama", 1), loraAdapter(t, "llama", 2)}
	e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1, LoRA: paths})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids := e.Descriptor().LoRAIdentity
	if len(ids) != len(paths) {
		t.Fatalf("%d identities for %d adapters", len(ids), len(paths))
	}
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); ids[i] != hex.EncodeToString(sum[:]) {
			t.Errorf("adapter %d: identity %s, file sha256 %x", i, ids[i], sum)
		}
	}
	if ids[0] == ids[1] {
		t.Error("two adapters share an identity")
	}
}
