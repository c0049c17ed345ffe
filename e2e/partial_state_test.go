package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/app"
	"superfluid/cgo"
	"superfluid/engine"
	"superfluid/synth"
)

// The model families of the day through the server — dense (qwen3),
// mixture-of-experts (qwen3moe), sliding-window (gemma4), hybrid (qwen35)
// and hybrid mixture-of-experts (qwen35moe): a prompt that leaves a cached
// one far back — more than the window, and anywhere for a recurrent
// state — is answered 200 from the cached prefix the model's state allows
// (all of it where any cut is valid, else a checkpoint's), with a lone
// run's output; the next turn is warm; after a restart the conversation
// is warm from disk. Issue 22: gemma4 answered 500 to such a prompt.
func TestPartialStateFamiliesReuseDivergingPrompts(t *testing.T) {
	if cgo.LlamaSource() != "upstream source tree" {
		t.Skip("the 2026 families need the upstream llama.cpp")
	}
	for _, arch := range []string{"qwen3", "qwen3moe", "gemma4", "qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) { partialStateTurns(t, arch) })
	}
}

// archModelFile writes (once per test binary) a tiny synthetic model of arch.
func archModelFile(t testing.TB, arch string) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := "tiny|arch=" + arch
	if p, ok := modelMemo[key]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, fmt.Sprintf("tiny-%s.gguf", arch))
	if err := synth.Write(path, synth.Options{Shape: s, Type: "f16", Seed: 11, Arch: arch}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

func partialStateTurns(t *testing.T, arch string) {
	path := archModelFile(t, arch)
	ref := newRefEngine(t, path, 4096)
	const predict = 8
	complete := func(st *parkStack, prompt []engine.Token) llamaCompletion {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": predict, "temperature": 0, "return_tokens": true, "cache_prompt": true})
		return llamaDo[llamaCompletion](t, st.Stack, "/completion", string(body))
	}
	dir := t.TempDir()
	st := startParkStack(t, app.Options{ModelPath: path, Lanes: 4, ParkDir: dir})
	// reusable is the cached prefix a prompt diverging at div can find:
	// all of it where any cut is valid, else up to the checkpoint before.
	every := ref.e.Descriptor().CheckpointEvery
	reusable := func(div int) int {
		if every == 0 {
			return div
		}
		return div / every * every
	}

	base := textTokens(t, ref.e, 1400, 1)
	r0 := complete(st, base)
	div := len(base) * 85 / 100
	edited := joinTokens(base[:div], textTokens(t, ref.e, 120, 2))
	r := complete(st, edited)
	t.Logf("%s: diverging at %d of %d: %d cached, prompt %.1f ms for %d tokens", arch, div, len(base), r.Timings.CacheN, r.Timings.PromptMS, r.Timings.PromptN)
	if r.Timings.CacheN < reusable(div) || r.Timings.CacheN > div {
		t.Errorf("diverging at %d: %d cached, want at least %d", div, r.Timings.CacheN, reusable(div))
	}
	expectAlone(t, ref, "the edited prompt", edited, r.Tokens, predict)

	// The same prompt again (a regenerated reply): it resumes at most a few
	// tokens before its end — a recurrent model from the checkpoint its
	// engine took there (engine.Descriptor.CheckpointTail).
	again := complete(st, edited)
	t.Logf("%s: the same prompt again: %d of %d cached", arch, again.Timings.CacheN, len(edited))
	if tail := max(1, ref.e.Descriptor().CheckpointTail); again.Timings.CacheN < len(edited)-tail {
		t.Errorf("the same prompt again: %d of %d cached, want at least %d", again.Timings.CacheN, len(edited), len(edited)-tail)
	}
	expectAlone(t, ref, "the same prompt again", edited, again.Tokens, predict)

	// Back to the conversation before the edit, its next turn: warm on
	// every family — a full-attention model's from the part the edit cut,
	// kept in host memory, put back onto the prefix the edit shares (kv
	// tail.go); the others' whole stream stayed in the pool.
	back := joinTokens(base, r0.Tokens, textTokens(t, ref.e, 60, 6))
	rb := complete(st, back)
	t.Logf("%s: back to the turn before the edit: %d of %d cached", arch, rb.Timings.CacheN, len(back))
	if rb.Timings.CacheN < len(base) {
		t.Errorf("back to the turn before the edit: %d cached, want at least its %d-token prompt", rb.Timings.CacheN, len(base))
	}
	expectAlone(t, ref, "the turn before the edit", back, rb.Tokens, predict)
	if tails := scrapeMetrics(t, st.URL())["superfluid_cache_host_tails_total"]; (tails > 0) != (ref.e.Descriptor().Partial == engine.PartialNone) {
		t.Errorf("%v tails went to host memory on a model whose partial state is %q; want them for full attention alone", tails, ref.e.Descriptor().Partial)
	}

	turn2 := joinTokens(edited, r.Tokens, textTokens(t, ref.e, 60, 3))
	r2 := complete(st, turn2)
	t.Logf("%s: second turn: %d of %d cached, prompt %.1f ms", arch, r2.Timings.CacheN, len(turn2), r2.Timings.PromptMS)
	if r2.Timings.CacheN < len(edited) {
		t.Errorf("second turn: %d cached, want at least the %d-token first turn", r2.Timings.CacheN, len(edited))
	}
	expectAlone(t, ref, "the second turn", turn2, r2.Tokens, predict)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = startParkStack(t, app.Options{ModelPath: path, Lanes: 4, ParkDir: dir})
	turn3 := joinTokens(turn2, r2.Tokens, textTokens(t, ref.e, 40, 4))
	r3 := complete(st, turn3)
	t.Logf("%s: after a restart: %d of %d cached, prompt %.1f ms", arch, r3.Timings.CacheN, len(turn3), r3.Timings.PromptMS)
	if r3.Timings.CacheN < len(turn2) {
		t.Errorf("after a restart: %d cached, want at least the %d-token second turn", r3.Timings.CacheN, len(turn2))
	}
	expectAlone(t, ref, "the turn after a restart", turn3, r3.Tokens, predict)

	// Diverging far back into what was restored from disk.
	div2 := len(turn2) * 85 / 100
	edited2 := joinTokens(turn2[:div2], textTokens(t, ref.e, 50, 5))
	r4 := complete(st, edited2)
	t.Logf("%s: after a restart, diverging at %d of %d: %d cached", arch, div2, len(turn2), r4.Timings.CacheN)
	if r4.Timings.CacheN < reusable(div2) || r4.Timings.CacheN > div2 {
		t.Errorf("after a restart, diverging at %d: %d cached, want at least %d", div2, r4.Timings.CacheN, reusable(div2))
	}
	expectAlone(t, ref, "the prompt diverging after a restart", edited2, r4.Tokens, predict)
}

// Without a host tier, a sliding-window model's cached conversations stay
// in the KV pool past half the context (kv residentBudget): evicted they
// would be gone. Five distinct 1,100-token prompts overflow the three
// quarters of a 4,096-token pool they may hold (app windowResidentShare):
// the least recently used leave before a step finds the pool full (every
// answer 200 and a lone run's), the last two stay — past half the pool —
// and a prompt editing each of them at 85% reuses it right up to the
// edit, not to the checkpoint before it.
func TestSlidingWindowEntriesStayResidentPastHalfThePool(t *testing.T) {
	if cgo.LlamaSource() != "upstream source tree" {
		t.Skip("gemma4 needs the upstream llama.cpp")
	}
	path := archModelFile(t, "gemma4")
	ref := newRefEngine(t, path, 4096)
	const predict = 4
	st := startParkStack(t, app.Options{ModelPath: path, Lanes: 2, HostCache: -1})
	complete := func(prompt []engine.Token) llamaCompletion {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": predict, "temperature": 0, "return_tokens": true, "cache_prompt": true})
		return llamaDo[llamaCompletion](t, st.Stack, "/completion", string(body))
	}
	var prompts [][]engine.Token
	for i := range 5 {
		p := textTokens(t, ref.e, 1100, uint64(100+i))
		r := complete(p)
		expectAlone(t, ref, fmt.Sprintf("prompt %d", i), p, r.Tokens, predict)
		prompts = append(prompts, p)
	}
	m := scrapeMetrics(t, st.URL())
	var kvFull float64
	for k, v := range m {
		if strings.HasPrefix(k, "superfluid_kv_full_total") {
			kvFull += v
		}
	}
	if kvFull != 0 || m["superfluid_cache_evictions_total"] == 0 {
		t.Errorf("%v KV-full steps, %v evictions: the cache should have evicted before the pool was full", kvFull, m["superfluid_cache_evictions_total"])
	}
	if r := m["superfluid_cache_resident_tokens"]; r <= 4096/2 {
		t.Errorf("%v tokens resident, want the last two prompts' (past half the pool)", r)
	}
	for i := len(prompts) - 1; i >= len(prompts)-2; i-- {
		div := len(prompts[i]) * 85 / 100
		edited := joinTokens(prompts[i][:div], textTokens(t, ref.e, 60, uint64(200+i)))
		r := complete(edited)
		t.Logf("prompt %d edited at %d: %d cached", i, div, r.Timings.CacheN)
		if r.Timings.CacheN != div {
			t.Errorf("prompt %d edited at %d: %d cached, want all of it", i, div, r.Timings.CacheN)
		}
		expectAlone(t, ref, fmt.Sprintf("prompt %d edited", i), edited, r.Tokens, predict)
	}
}

// With a host tier, a sliding-window model keeps in the KV pool only the
// conversation being served, as llama-server keeps only its active slot:
// each prompt of another conversation sends the last one's entry to host
// memory as it is admitted, so its steps attend over its own cells alone
// (issue 22: beside the resident conversations, a gemma4 cold prompt took
// 1.35× llama-server's time). The last conversation's edit still cuts
// where it diverges; an older one's resumes from its checkpoint in host
// memory, as llama-server's would from its own; every answer is a lone
// run's.
func TestSlidingWindowKeepsOnlyTheServedConversationResident(t *testing.T) {
	if cgo.LlamaSource() != "upstream source tree" {
		t.Skip("gemma4 needs the upstream llama.cpp")
	}
	path := archModelFile(t, "gemma4")
	ref := newRefEngine(t, path, 4096)
	const predict = 4
	st := startParkStack(t, app.Options{ModelPath: path, Lanes: 2})
	complete := func(prompt []engine.Token) llamaCompletion {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": predict, "temperature": 0, "return_tokens": true, "cache_prompt": true})
		return llamaDo[llamaCompletion](t, st.Stack, "/completion", string(body))
	}
	var prompts [][]engine.Token
	for i := range 3 {
		p := textTokens(t, ref.e, 1100, uint64(300+i))
		r := complete(p)
		expectAlone(t, ref, fmt.Sprintf("prompt %d", i), p, r.Tokens, predict)
		prompts = append(prompts, p)
	}
	m := scrapeMetrics(t, st.URL())
	if r := m["superfluid_cache_resident_tokens"]; r <= 1100 || r > 1100+predict {
		t.Errorf("%v tokens resident, want the last conversation's alone (1,100 and its reply)", r)
	}
	if m["superfluid_cache_host_bytes"] == 0 {
		t.Error("nothing in host memory: the older conversations should wait there")
	}
	every := ref.e.Descriptor().CheckpointEvery
	for _, c := range []struct {
		i    int
		want func(div int) int
	}{
		{2, func(div int) int { return div }},                 // resident: cut at the edit
		{0, func(div int) int { return div / every * every }}, // host memory: its checkpoint
	} {
		div := len(prompts[c.i]) * 85 / 100
		edited := joinTokens(prompts[c.i][:div], textTokens(t, ref.e, 60, uint64(400+c.i)))
		r := complete(edited)
		t.Logf("prompt %d edited at %d: %d cached", c.i, div, r.Timings.CacheN)
		if r.Timings.CacheN != c.want(div) {
			t.Errorf("prompt %d edited at %d: %d cached, want %d", c.i, div, r.Timings.CacheN, c.want(div))
		}
		expectAlone(t, ref, fmt.Sprintf("prompt %d edited", c.i), edited, r.Tokens, predict)
	}
}
