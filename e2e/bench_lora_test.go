package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"superfluid/app"
	"superfluid/synth"
)

// BenchmarkLoRARestartTurn: a conversation's next turn under a LoRA
// adapter after the server restarted (its ~1,500-token first turn parked
// on stop, restored from disk) against the same prompt on a server that
// has cached nothing, on the small synthetic model (f16) with a synthetic
// adapter: prompt milliseconds each, and their ratio.
//
//	go test ./e2e/ -run '^$' -bench BenchmarkLoRARestartTurn -benchtime 3x
func BenchmarkLoRARestartTurn(b *testing.B) {
	dir := b.TempDir()
	shape, err := synth.ShapeByName("small")
	if err != nil {
		b.Fatal(err)
	}
	model, adapter := filepath.Join(dir, "small.gguf"), filepath.Join(dir, "small-lora.gguf")
	if err := synth.Write(model, synth.Options{Shape: shape, Type: "f16", Seed: 1}); err != nil {
		b.Fatal(err)
	}
	if err := synth.WriteLoRA(adapter, synth.LoRAOptions{Shape: shape, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	o := func(park string) app.Options {
		return app.Options{ModelPath: model, Ctx: 4096, Threads: benchThreads, ParkDir: park, LoRA: []app.LoRAFile{{Path: adapter}}}
	}
	var warmMS, coldMS float64
	cached := 0
	for i := range b.N {
		park := filepath.Join(dir, "park", string(rune('a'+i)))
		if err := os.MkdirAll(park, 0o755); err != nil {
			b.Fatal(err)
		}
		st := startParkStack(b, o(park))
		toks := llamaTokens(b, st.Stack, strings.Repeat("The first turn of a long conversation under an adapter, with its context. ", 100), false)[:1500]
		first := loraCompletion(b, st.Stack, toks, scaled(0, 1))
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		again := startParkStack(b, o(park))
		turn2 := slices.Concat(toks, first.Tokens, llamaTokens(b, again.Stack, " And the next question?", false))
		warm := loraCompletion(b, again.Stack, turn2, scaled(0, 1))
		again.Close()
		cold := startParkStack(b, o(""))
		whole := loraCompletion(b, cold.Stack, turn2, scaled(0, 1))
		cold.Close()
		warmMS += warm.Timings.PromptMS
		coldMS += whole.Timings.PromptMS
		cached = warm.TokensCached
	}
	n := float64(b.N)
	b.ReportMetric(warmMS/n, "restored-prompt-ms")
	b.ReportMetric(coldMS/n, "cold-prompt-ms")
	b.ReportMetric(warmMS/coldMS, "restored-vs-cold-x")
	b.Logf("next turn under an adapter after a restart: %d tokens restored, prompt %.0f ms; cold %.0f ms", cached, warmMS/n, coldMS/n)
}
