package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/app"
)

// KV cache types end to end, on the small synthetic shape (head size 64:
// the tiny shape's 16 is no whole block of a quantized type).

// A q8_0 KV server's greedy replies are an f16 engine's run alone,
// except where the f16 run's two best tokens are within the near-tie
// oracle's tolerance; its /metrics report the bytes one context token
// takes, 34/64 of f16's.
func TestQ8_0CacheServerMatchesF16(t *testing.T) {
	path := model(t, "small", "")
	ref := newRefEngine(t, path, 1024) // f16 cells
	st := startStack(t, app.Options{ModelPath: path, Ctx: 2048, Lanes: 2, CacheTypeK: "q8_0", CacheTypeV: "q8_0"})
	const maxTokens = 16
	for i := range 4 {
		prompt := textTokens(t, ref.e, 20+12*i, uint64(100+i))
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": maxTokens, "temperature": 0, "return_tokens": true})
		c := llamaDo[llamaCompletion](t, st, "/completion", string(body))
		if c.TokensEvaluated != len(prompt) {
			t.Fatalf("prompt %d: %d tokens evaluated, %d sent", i, c.TokensEvaluated, len(prompt))
		}
		expectAlone(t, ref, fmt.Sprintf("q8_0 KV, prompt %d", i), prompt, c.Tokens, maxTokens)
	}
	f16 := ref.e.Descriptor().KVBytesPerToken
	m := parkScrape(t, st)
	got := m[`superfluid_model_kv_bytes_per_token{model="tiny",cache_type_k="q8_0",cache_type_v="q8_0"}`]
	if int64(got)*64 != f16*34 {
		t.Fatalf("/metrics: %v KV bytes per token at q8_0, f16 %d", got, f16)
	}
}

// startTypedParkStack is a parking server on the small model with the
// given K and V cache types.
func startTypedParkStack(t *testing.T, dir, typeK, typeV string) *parkStack {
	t.Helper()
	return startParkStack(t, app.Options{ModelPath: model(t, "small", ""), ParkDir: dir, CacheTypeK: typeK, CacheTypeV: typeV})
}

// A conversation parked from a cache of each type restores warm after a
// restart with the same types, and says what it says without a restart.
func TestParkEachCacheTypeRestoresAfterRestart(t *testing.T) {
	for _, types := range [][2]string{{"f16", "f16"}, {"q8_0", "q8_0"}, {"q4_0", "q4_0"}, {"q8_0", "f16"}} {
		t.Run(types[0]+"-"+types[1], func(t *testing.T) {
			mem := startTypedParkStack(t, "", types[0], types[1])
			turn1 := parkChat(t, mem, parkTurn1())
			warm2 := parkChat(t, mem, parkTurn2(turn1.Content))
			mem.Close()
			if warm2.Cached == 0 {
				t.Fatalf("turn 2 without a restart found nothing cached: %+v", warm2)
			}

			dir := t.TempDir()
			st := startTypedParkStack(t, dir, types[0], types[1])
			if r := parkChat(t, st, parkTurn1()); r != turn1 {
				t.Fatalf("turn 1 with parking on: %+v, without %+v", r, turn1)
			}
			st.Close()
			files := parkFiles(t, dir)
			sub := "-" + types[0] + "-"
			if types[1] != types[0] {
				sub += types[1] + "-"
			}
			if len(files) != 1 || !strings.Contains(filepath.Dir(files[0]), sub) {
				t.Fatalf("park files %v: want one in a subdirectory naming %s", files, sub)
			}

			st = startTypedParkStack(t, dir, types[0], types[1])
			r := parkChat(t, st, parkTurn2(turn1.Content))
			if r.Cached != warm2.Cached || r.Content != warm2.Content || st.Cache.Stats().ParkHits.Load() != 1 {
				t.Fatalf("turn 2 after a restart: %+v (%d restores); without a restart %+v", r, st.Cache.Stats().ParkHits.Load(), warm2)
			}
		})
	}
}

// An f16 conversation's park file is never read by a q8_0 server: in the
// shared park directory it sits in f16's subdirectory, which the q8_0
// server does not look in; copied into the q8_0 subdirectory it is
// refused by its header's KV type, counted and left alone. Either way the
// next turn is a cold prefill answered 200, as a q8_0 server that never
// parked answers it.
func TestParkFileOfAnotherCacheTypeRefused(t *testing.T) {
	dir := t.TempDir()
	f16 := startTypedParkStack(t, dir, "f16", "f16")
	turn1 := parkChat(t, f16, parkTurn1())
	f16.Close()
	files := parkFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("park files %v", files)
	}

	cold := startTypedParkStack(t, "", "q8_0", "q8_0")
	want := parkChat(t, cold, parkTurn2(turn1.Content))
	cold.Close()
	if want.Cached != 0 {
		t.Fatalf("a fresh q8_0 server found %d tokens cached", want.Cached)
	}

	q8 := startTypedParkStack(t, dir, "q8_0", "q8_0")
	if r := parkChat(t, q8, parkTurn2(turn1.Content)); r != want || q8.Cache.ParkStats().Reads.Load() != 0 || parkRefused(q8) != 0 {
		t.Fatalf("beside an f16 park file: %+v, %d park reads, %d refusals; want %+v", r, q8.Cache.ParkStats().Reads.Load(), parkRefused(q8), want)
	}
	q8.Close()

	// The f16 file where the q8_0 server looks: its own subdirectory, now
	// holding the q8_0 turn 1 parked as the server stopped, is cleared of
	// it so that only the f16 state could answer.
	var q8Dir string
	for _, f := range parkFiles(t, dir) {
		if strings.Contains(f, "-q8_0-") {
			q8Dir = filepath.Join(dir, filepath.Dir(f))
			os.Remove(filepath.Join(dir, f))
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil || q8Dir == "" {
		t.Fatalf("the f16 file: %v; the q8_0 subdirectory %q", err, q8Dir)
	}
	moved := filepath.Join(q8Dir, filepath.Base(files[0]))
	if err := os.WriteFile(moved, data, 0o644); err != nil {
		t.Fatal(err)
	}
	q8 = startTypedParkStack(t, dir, "q8_0", "q8_0")
	if r := parkChat(t, q8, parkTurn2(turn1.Content)); r != want {
		t.Fatalf("with an f16 file in the q8_0 subdirectory: %+v, want %+v", r, want)
	}
	m := parkScrape(t, q8)
	if n := m[`superfluid_park_refused_total{reason="kv_type"}`]; n != 1 || parkRefused(q8) != 1 || q8.Cache.Stats().ParkHits.Load() != 0 {
		t.Fatalf("refused for the KV type %v, %d refusals in all, %d restores", n, parkRefused(q8), q8.Cache.Stats().ParkHits.Load())
	}
	if _, err := os.Stat(moved); err != nil {
		t.Fatalf("the other type's file was not left alone: %v", err)
	}
}

// The host tier holds each conversation's exported state, whose size
// follows the cache types: the same requests leave q8_0 state of 34/64 of
// f16's bytes there (to within the per-cell and per-state headers).
func TestHostTierHoldsStateOfTheCacheTypes(t *testing.T) {
	path := model(t, "small", "")
	hostBytes := map[string]float64{}
	for _, typ := range []string{"f16", "q8_0"} {
		// One lane and two sequences: each new conversation pushes the one
		// before out of the pool, into host memory.
		st := startStack(t, app.Options{ModelPath: path, Ctx: 2048, Lanes: 1, Seqs: 2, CacheTypeK: typ, CacheTypeV: typ})
		ref := newRefEngine(t, path, 256) // for its tokenizer
		for i := range 4 {
			body, _ := json.Marshal(map[string]any{"prompt": textTokens(t, ref.e, 100, uint64(200+i)), "n_predict": 4, "temperature": 0})
			llamaDo[llamaCompletion](t, st, "/completion", string(body))
		}
		m := parkScrape(t, st)
		entries := m[`superfluid_cache_entries{tier="host"}`]
		if entries < 2 {
			t.Fatalf("%s: %v conversations in host memory", typ, entries)
		}
		hostBytes[typ] = m["superfluid_cache_host_bytes"]
		t.Logf("%s: %v conversations, %v bytes in host memory", typ, entries, hostBytes[typ])
	}
	if r := hostBytes["q8_0"] / hostBytes["f16"]; r < 0.50 || r > 0.56 {
		t.Fatalf("host memory holds %v bytes of q8_0 state against %v of f16 (%.3f), want about 34/64", hostBytes["q8_0"], hostBytes["f16"], r)
	}
}
