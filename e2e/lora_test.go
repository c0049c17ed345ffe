package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"superfluid/app"
	"superfluid/engine"
	"superfluid/synth"
)

// LoRA end to end: the tiny synthetic model served with synthetic
// adapters (--lora), chosen per request by llama.cpp's lora field.

func loraFile(t testing.TB, seed uint64) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := fmt.Sprintf("lora|%d", seed)
	if p, ok := modelMemo[key]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, fmt.Sprintf("lora-%d.gguf", seed))
	if err := synth.WriteLoRA(path, synth.LoRAOptions{Shape: s, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// loraStack serves the tiny model with two adapters, unapplied by default.
func loraStack(t *testing.T) *app.Stack {
	return startStack(t, app.Options{Lanes: 4, LoRA: []app.LoRAFile{{Path: loraFile(t, 1)}, {Path: loraFile(t, 2)}}})
}

// loraCompletion is a greedy /completion of prompt under lora (nil: the
// field left out), with the top alternatives for the near-tie oracle.
func loraCompletion(t testing.TB, st *app.Stack, prompt any, lora any) llamaCompletion {
	t.Helper()
	body := map[string]any{"prompt": prompt, "n_predict": 24, "temperature": 0, "n_probs": 5, "return_tokens": true}
	if lora != nil {
		body["lora"] = lora
	}
	return llamaDo[llamaCompletion](t, st, "/completion", jsonBody(body))
}

func scaled(id int, s float64) []map[string]any { return []map[string]any{{"id": id, "scale": s}} }

// sameOrNearTie: got equals alone, or parts from it where alone's top
// alternatives could not tell the two tokens apart (tieNats).
func sameOrNearTie(got, alone llamaCompletion) (bool, string) {
	if slices.Equal(got.Tokens, alone.Tokens) {
		return true, ""
	}
	d := 0
	for d < len(got.Tokens) && d < len(alone.Tokens) && got.Tokens[d] == alone.Tokens[d] {
		d++
	}
	if d >= len(got.Tokens) || d >= len(alone.Tokens) || d >= len(alone.Probs) {
		return false, fmt.Sprintf("lengths %d/%d", len(got.Tokens), len(alone.Tokens))
	}
	lp := map[engine.Token]float64{}
	for _, alt := range alone.Probs[d].TopLogprobs {
		lp[alt.ID] = alt.Logprob
	}
	best, ok1 := lp[alone.Tokens[d]]
	mine, ok2 := lp[got.Tokens[d]]
	if ok1 && ok2 && best-mine <= tieNats {
		return true, ""
	}
	return false, fmt.Sprintf("token %d: %d, alone %d", d, got.Tokens[d], alone.Tokens[d])
}

// At scale 0 an adapter leaves the base model's greedy output as it is; at
// scale 1 it changes it, and two adapters differ.
func TestLoRAScaleZeroIsTheBase(t *testing.T) {
	st := loraStack(t)
	const prompt = "The adapter reads the first line of the file"
	base := loraCompletion(t, st, prompt, nil)
	if got := loraCompletion(t, st, prompt, scaled(0, 0)); !slices.Equal(got.Tokens, base.Tokens) {
		t.Errorf("scale 0: %v\nbase:    %v", got.Tokens, base.Tokens)
	}
	one := loraCompletion(t, st, prompt, scaled(0, 1))
	two := loraCompletion(t, st, prompt, scaled(1, 1))
	if slices.Equal(one.Tokens, base.Tokens) || slices.Equal(two.Tokens, base.Tokens) || slices.Equal(one.Tokens, two.Tokens) {
		t.Errorf("the adapters change nothing:\nbase %v\none  %v\ntwo  %v", base.Tokens, one.Tokens, two.Tokens)
	}
	// An adapter run leaves nothing in the cache: the next base request
	// on the same prompt is the base's output still.
	if got := loraCompletion(t, st, prompt, nil); !slices.Equal(got.Tokens, base.Tokens) {
		t.Errorf("base after the adapters: %v\nwas: %v", got.Tokens, base.Tokens)
	}
}

// No cached prefix crosses adapters, in either order: on one server the
// base model caches a prompt first and an adapter runs on it after; on
// another the adapter runs first and the base after. A prefix that served
// across sets would make the two servers' answers differ.
func TestLoRANoCachedPrefixCrossesAdapters(t *testing.T) {
	const prompt = "A long shared system prompt that the cache keeps between the turns of a conversation; then the question"
	first := loraStack(t)
	baseFirst := loraCompletion(t, first, prompt, nil)
	adapterAfter := loraCompletion(t, first, prompt+" again", scaled(0, 1))
	second := loraStack(t)
	adapterFirst := loraCompletion(t, second, prompt+" again", scaled(0, 1))
	baseAfter := loraCompletion(t, second, prompt, nil)
	if !slices.Equal(adapterAfter.Tokens, adapterFirst.Tokens) {
		t.Errorf("adapter after a cached base prompt: %v\nadapter cold:                      %v", adapterAfter.Tokens, adapterFirst.Tokens)
	}
	if !slices.Equal(baseAfter.Tokens, baseFirst.Tokens) {
		t.Errorf("base after an adapter run: %v\nbase cold:                 %v", baseAfter.Tokens, baseFirst.Tokens)
	}
	if adapterAfter.TokensCached != 0 {
		t.Errorf("the adapter request reports %d cached tokens", adapterAfter.TokensCached)
	}
	if again := loraCompletion(t, first, prompt, nil); again.TokensCached == 0 {
		t.Error("the base prompt was not cached: the test shows nothing")
	}
	// An adapter's own streams serve it: its next turn starts warm and
	// answers as the cold one did.
	warm := loraCompletion(t, first, prompt+" again", scaled(0, 1))
	if warm.TokensCached == 0 || !slices.Equal(warm.Tokens, adapterFirst.Tokens) {
		t.Errorf("the adapter's repeat: %d cached, %v; want warm and %v", warm.TokensCached, warm.Tokens, adapterFirst.Tokens)
	}
}

// Requests under different adapters at once each give what they give
// alone (steps run one adapter set at a time).
func TestLoRAConcurrentAdapters(t *testing.T) {
	st := loraStack(t)
	type run struct {
		prompt string
		lora   any
	}
	runs := []run{
		{"The first request asks about the river", scaled(0, 1)},
		{"The second request asks about the mountain", scaled(1, 0.7)},
		{"The third request asks about the sea", nil},
		{"The fourth request asks about the forest", []map[string]any{{"id": 0, "scale": 0.5}, {"id": 1, "scale": 0.5}}},
	}
	alone := make([]llamaCompletion, len(runs))
	for i, r := range runs {
		alone[i] = loraCompletion(t, st, r.prompt, r.lora)
	}
	together := make([]llamaCompletion, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			together[i] = loraCompletion(t, st, r.prompt, r.lora)
		}()
	}
	wg.Wait()
	for i := range runs {
		if ok, why := sameOrNearTie(together[i], alone[i]); !ok {
			t.Errorf("request %d at once differs from alone: %s\n got %v\nalone %v", i, why, together[i].Tokens, alone[i].Tokens)
		}
	}
}

// /lora-adapters lists the adapters and sets the scales requests that name
// none get; bad lora fields are 400s naming lora.
func TestLoRAAdaptersRoutesAndRefusals(t *testing.T) {
	st := loraStack(t)
	list := llamaDo[[]struct {
		ID    int     `json:"id"`
		Path  string  `json:"path"`
		Scale float64 `json:"scale"`
	}](t, st, "/lora-adapters", "")
	if len(list) != 2 || list[0].ID != 0 || list[1].Path != loraFile(t, 2) || list[0].Scale != 0 {
		t.Fatalf("GET /lora-adapters: %+v", list)
	}
	const prompt = "Global scales apply to requests that name no adapter"
	one := loraCompletion(t, st, prompt, scaled(0, 1))
	base := loraCompletion(t, st, prompt, nil)
	// Ollama has no lora field: its requests follow the global scales.
	ollama := func() string {
		status, b := post(t, st.URL()+"/api/generate", map[string]any{"model": "tiny", "prompt": prompt, "raw": true, "stream": false,
			"options": map[string]any{"temperature": 0, "num_predict": 16}})
		if status != 200 {
			t.Fatalf("/api/generate: %d %s", status, b)
		}
		var r struct {
			Response string `json:"response"`
		}
		_ = json.Unmarshal(b, &r)
		return r.Response
	}
	ollamaBase := ollama()
	if status, b := llamaPost(t, st.URL()+"/lora-adapters", `[{"id":0,"scale":1}]`); status != 200 {
		t.Fatalf("POST /lora-adapters: %d %s", status, b)
	}
	if got := ollama(); got == ollamaBase {
		t.Errorf("an Ollama request ignores the global scale: %q", got)
	}
	if got := loraCompletion(t, st, prompt, nil); !slices.Equal(got.Tokens, one.Tokens) {
		t.Errorf("after POST, a request naming none: %v, want the adapter's %v", got.Tokens, one.Tokens)
	}
	if got := loraCompletion(t, st, prompt, []any{}); !slices.Equal(got.Tokens, base.Tokens) {
		t.Errorf("lora [] (every adapter at 0): %v, want the base's %v", got.Tokens, base.Tokens)
	}
	if status, b := llamaPost(t, st.URL()+"/lora-adapters", `[]`); status != 200 {
		t.Fatalf("POST /lora-adapters []: %d %s", status, b)
	}
	if got := ollama(); got != ollamaBase {
		t.Errorf("an Ollama request after the scales went back to 0: %q, was %q", got, ollamaBase)
	}
	// The OpenAI endpoint takes the field too.
	status, b := post(t, st.URL()+"/v1/chat/completions", map[string]any{"model": "tiny", "max_tokens": 4,
		"messages": []map[string]string{{"role": "user", "content": "hi"}}, "lora": scaled(1, 1)})
	if status != 200 {
		t.Errorf("chat with lora: %d %s", status, b)
	}
	for _, bad := range []string{
		`"lora":[{"id":2,"scale":1}]`, `"lora":[{"id":-1,"scale":1}]`, `"lora":[{"id":0,"scale":1e9}]`,
		`"lora":[{"id":0,"scale":"1"}]`, `"lora":[{"id":0.5,"scale":1}]`, `"lora":[{"scale":1}]`,
		`"lora":"adapter"`, `"lora":[7]`, `"lora":[{"id":0,"scale":1e999}]`,
	} {
		status, b := llamaPost(t, st.URL()+"/completion", `{"prompt":"x","n_predict":1,`+bad+`}`)
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if status != 400 || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error.Message, "lora") {
			t.Errorf("%s: %d %s", bad, status, b)
		}
	}
	if status, b := llamaPost(t, st.URL()+"/lora-adapters", `{"id":0}`); status != 400 {
		t.Errorf("POST an object: %d %s", status, b)
	}
	if status, b := llamaPost(t, st.URL()+"/lora-adapters", `[{"id":9,"scale":1}]`); status != 400 {
		t.Errorf("POST an unknown id: %d %s", status, b)
	}
	// Still serving.
	loraCompletion(t, st, "still here", scaled(0, 1))
}

// `run --lora FILE:SCALE` (app.LoadModel and OneSpec) generates under the
// adapters' scales; at scale 0 it generates the base model's text.
func TestLoRARunOne(t *testing.T) {
	text := func(scale float32) string {
		m, closeModel, err := app.LoadModel(app.Options{ModelPath: tinyModel(t), Threads: 1, Ctx: 1024, Lanes: 1,
			LoRA: []app.LoRAFile{{Path: loraFile(t, 1), Scale: scale}}})
		if err != nil {
			t.Fatal(err)
		}
		defer closeModel()
		spec, err := app.OneSpec(m, app.OneRequest{Prompt: "Run one prompt through the adapter", MaxTokens: 16, Temperature: new(float64)})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if _, err := app.RunOne(t.Context(), m, spec, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	m, closeModel, err := app.LoadModel(app.Options{ModelPath: tinyModel(t), Threads: 1, Ctx: 1024, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := app.OneSpec(m, app.OneRequest{Prompt: "Run one prompt through the adapter", MaxTokens: 16, Temperature: new(float64)})
	if err != nil {
		t.Fatal(err)
	}
	var base strings.Builder
	if _, err := app.RunOne(t.Context(), m, spec, &base); err != nil {
		t.Fatal(err)
	}
	closeModel()
	if got := text(0); got != base.String() {
		t.Errorf("scale 0: %q, base %q", got, base.String())
	}
	if got := text(1); got == base.String() {
		t.Errorf("scale 1 gives the base's text %q", got)
	}
}

// A conversation under an adapter parks when the server stops and resumes
// warm after a restart with the same --lora files: its namespace is named
// by the adapters' digests and scales, which a park file records. Under
// another scale, or with another file in the adapter's place, the same
// prompt starts cold and answers as a lone run under that set does: a
// parked prefix never crosses sets (were a set named by position alone,
// the last case would restore the first adapter's stream).
func TestLoRAParkRestoresAfterRestart(t *testing.T) {
	prompt := strings.Repeat("A conversation under an adapter, long enough to park: the system prompt, the user's question and its context. ", 3)
	dir := t.TempDir()
	adapters := []app.LoRAFile{{Path: loraFile(t, 1)}, {Path: loraFile(t, 2)}}
	st := startParkStack(t, app.Options{ParkDir: dir, LoRA: adapters})
	toks := llamaTokens(t, st.Stack, prompt, false)
	first := loraCompletion(t, st.Stack, toks, scaled(0, 1))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if files := parkFiles(t, dir); len(files) == 0 {
		t.Fatal("nothing parked on stop")
	}

	// The next turn: the first turn's prompt and answer, then more.
	again := startParkStack(t, app.Options{ParkDir: dir, LoRA: adapters})
	turn2 := slices.Concat(toks, first.Tokens, llamaTokens(t, again.Stack, " And then?", false))
	warm := loraCompletion(t, again.Stack, turn2, scaled(0, 1))
	t.Logf("the next turn after a restart: %d of %d prompt tokens cached", warm.TokensCached, warm.TokensEvaluated)
	if want := first.TokensEvaluated + len(first.Tokens) - 1; warm.TokensCached < want {
		t.Errorf("the next turn after a restart: %d tokens cached, want the first turn's %d", warm.TokensCached, want)
	}
	loneTurn2 := loraCompletion(t, startStack(t, app.Options{Lanes: 1, LoRA: adapters}), turn2, scaled(0, 1))
	if ok, why := sameOrNearTie(warm, loneTurn2); !ok {
		t.Errorf("the restored turn differs from its lone run: %s", why)
	}
	half := loraCompletion(t, again.Stack, toks, scaled(0, 0.5))
	if half.TokensCached != 0 {
		t.Errorf("another scale after a restart: %d tokens cached", half.TokensCached)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}

	swapped := []app.LoRAFile{{Path: loraFile(t, 3)}, {Path: loraFile(t, 2)}}
	other := startParkStack(t, app.Options{ParkDir: dir, LoRA: swapped})
	cold := loraCompletion(t, other.Stack, toks, scaled(0, 1))
	if cold.TokensCached != 0 {
		t.Errorf("another adapter file in the same place: %d tokens cached from the first's stream", cold.TokensCached)
	}

	loneHalf := loraCompletion(t, startStack(t, app.Options{Lanes: 1, LoRA: adapters}), toks, scaled(0, 0.5))
	if ok, why := sameOrNearTie(half, loneHalf); !ok {
		t.Errorf("scale 0.5 after a restart differs from its lone run: %s", why)
	}
	loneSwapped := loraCompletion(t, startStack(t, app.Options{Lanes: 1, LoRA: swapped}), toks, scaled(0, 1))
	if ok, why := sameOrNearTie(cold, loneSwapped); !ok {
		t.Errorf("the other adapter after a restart differs from its lone run: %s", why)
	}
	if slices.Equal(loneSwapped.Tokens, first.Tokens) {
		t.Error("the two adapters answer alike: the test shows nothing")
	}
}

// /props and /slots list every loaded adapter at its scale in their params
// (llama-server's {"id", "scale"} shape), a completion's
// generation_settings the scales it ran under, and Ollama's /api/show an
// ADAPTER line per adapter its requests run under.
func TestLoRAListedInPropsSlotsAndShow(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 2, LoRA: []app.LoRAFile{{Path: loraFile(t, 1), Scale: 0.5}, {Path: loraFile(t, 2)}}})
	type params struct {
		LoRA []struct {
			ID    int     `json:"id"`
			Scale float64 `json:"scale"`
		} `json:"lora"`
	}
	type slot struct {
		Params params `json:"params"`
	}
	want := func(where string, p params, scales ...float64) {
		t.Helper()
		if len(p.LoRA) != len(scales) {
			t.Fatalf("%s: lora %+v, want scales %v", where, p.LoRA, scales)
		}
		for i, s := range scales {
			if p.LoRA[i].ID != i || p.LoRA[i].Scale != s {
				t.Errorf("%s: lora %+v, want scales %v", where, p.LoRA, scales)
			}
		}
	}
	props := llamaDo[struct {
		Default slot `json:"default_generation_settings"`
	}](t, st, "/props", "")
	want("/props", props.Default.Params, 0.5, 0)
	slots := llamaDo[[]slot](t, st, "/slots", "")
	if len(slots) != 2 {
		t.Fatalf("/slots: %d entries", len(slots))
	}
	want("/slots", slots[1].Params, 0.5, 0)
	ran := llamaDo[struct {
		Settings params `json:"generation_settings"`
	}](t, st, "/completion", jsonBody(map[string]any{"prompt": "x", "n_predict": 1, "lora": scaled(1, 2)}))
	want("generation_settings", ran.Settings, 0, 2)

	status, b := post(t, st.URL()+"/api/show", map[string]any{"model": "tiny"})
	var show struct {
		Modelfile string `json:"modelfile"`
	}
	if status != 200 || json.Unmarshal(b, &show) != nil {
		t.Fatalf("/api/show: %d %s", status, b)
	}
	if !strings.Contains(show.Modelfile, "ADAPTER "+loraFile(t, 1)+"\n") || strings.Contains(show.Modelfile, loraFile(t, 2)) || !strings.Contains(show.Modelfile, "scale 0.5") {
		t.Errorf("/api/show modelfile:\n%s", show.Modelfile)
	}
	plain := llamaDo[struct {
		Default slot `json:"default_generation_settings"`
	}](t, startStack(t, app.Options{Lanes: 1}), "/props", "")
	if plain.Default.Params.LoRA == nil || len(plain.Default.Params.LoRA) != 0 {
		t.Errorf("a model without adapters: lora %+v, want []", plain.Default.Params.LoRA)
	}
}
