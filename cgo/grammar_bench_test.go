package cgo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/grammar"
)

// benchSchema is a JSON Schema whose every string and number is bounded:
// random weights would otherwise never close a string.
func benchSchema(props int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	var req []string
	for i := range props {
		if i > 0 {
			b.WriteString(",")
		}
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, `"s%d":{"type":"string","maxLength":6}`, i)
		case 1:
			fmt.Fprintf(&b, `"n%d":{"type":"integer","minimum":0,"maximum":999}`, i)
		default:
			fmt.Fprintf(&b, `"b%d":{"type":"boolean"}`, i)
		}
		req = append(req, fmt.Sprintf(`"%c%d"`, "snb"[i%3], i))
	}
	fmt.Fprintf(&b, `},"required":[%s]}`, strings.Join(req, ","))
	return b.String()
}

func benchGBNF(b *testing.B, props int) string {
	g, err := grammar.FromJSONSchema([]byte(benchSchema(props)), grammar.Options{Strict: true, CompactWhitespace: true})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkGrammarDecode: decode tokens/s of greedy lanes held to a
// JSON-schema grammar against unconstrained ones, at 1 and 8 streams, and
// the share of constrained tokens the one-token check accepted (fast%).
// Random weights are the worst case for that share: the model's choice is
// almost never what the format needs, so nearly every token is masked.
func BenchmarkGrammarDecode(b *testing.B) {
	gbnf := benchGBNF(b, 6)
	for _, streams := range []int{1, 8} {
		for _, constrained := range []bool{false, true} {
			name := fmt.Sprintf("streams=%d/grammar=%v", streams, constrained)
			b.Run(name, func(b *testing.B) {
				e, err := Open(Options{ModelPath: benchModel(b), Ctx: 4096, Lanes: streams, Seqs: streams, Batch: 512, Threads: 2})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				var gid engine.GrammarID
				if constrained {
					if gid, err = e.AcquireGrammar(&engine.GrammarSpec{GBNF: gbnf}); err != nil {
						b.Fatal(err)
					}
				}
				var spent time.Duration
				var tokens int
				var tm engine.Timings
				for range b.N {
					d, n, t := grammarDecodeRun(b, e, streams, gid)
					spent += d
					tokens += n
					tm.GrammarFast += t.GrammarFast
					tm.GrammarMasked += t.GrammarMasked
				}
				b.ReportMetric(float64(tokens)/spent.Seconds(), "tok/s")
				if constrained {
					b.ReportMetric(100*float64(tm.GrammarFast)/float64(max(tm.GrammarFast+tm.GrammarMasked, 1)), "fast%")
				}
			})
		}
	}
}

// grammarDecodeRun prefills streams lanes and decodes them to their end (at
// most 96 tokens each), timing the decode ticks.
func grammarDecodeRun(b *testing.B, e *Engine, streams int, gid engine.GrammarID) (time.Duration, int, engine.Timings) {
	var p engine.Plan
	for i := range streams {
		e.Free(int32(i))
		prompt := promptTokens(b, e, 32, fmt.Sprint(i))
		p.AddAdmit(engine.Admit{Lane: uint32(i + 1), Seq: int32(i), MaxTokens: 96, Grammar: gid, Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: uint32(i + 1), Count: 32})
	}
	var spent time.Duration
	var tm engine.Timings
	tokens := 0
	for first := true; !p.Empty(); first = false {
		start := time.Now()
		ev, err := e.Tick(&p)
		if err != nil {
			b.Fatal(err)
		}
		if !first {
			spent += time.Since(start)
			tokens += len(ev.Tokens)
		}
		tm.GrammarFast += ev.Timings.GrammarFast
		tm.GrammarMasked += ev.Timings.GrammarMasked
		p.Reset()
		for _, le := range ev.Lanes {
			if le.Finish != engine.FinishNone {
				p.Retires = append(p.Retires, le.Lane)
			} else {
				p.Decodes = append(p.Decodes, engine.Decode{Lane: le.Lane})
			}
		}
	}
	return spent, tokens, tm
}

// BenchmarkGrammarCompile: a 30-property schema's grammar compiled cold
// (Go checks, llama.cpp's parser, the start stacks) and found cached.
func BenchmarkGrammarCompile(b *testing.B) {
	gbnf := benchGBNF(b, 30)
	e, err := Open(Options{ModelPath: benchModel(b), Ctx: 512, Lanes: 1, Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.Run("cold", func(b *testing.B) {
		for i := range b.N {
			// A comment makes each text new to the cache.
			g := engine.GrammarSpec{GBNF: gbnf + fmt.Sprintf("\n# %d", i)}
			id, err := e.AcquireGrammar(&g)
			if err != nil {
				b.Fatal(err)
			}
			e.ReleaseGrammar(id)
		}
	})
	b.Run("cached", func(b *testing.B) {
		g := engine.GrammarSpec{GBNF: gbnf}
		if id, err := e.AcquireGrammar(&g); err == nil {
			e.ReleaseGrammar(id) // compiled once, then idle in the cache
		}
		b.ResetTimer()
		for range b.N {
			id, err := e.AcquireGrammar(&g)
			if err != nil {
				b.Fatal(err)
			}
			e.ReleaseGrammar(id)
		}
	})
}
