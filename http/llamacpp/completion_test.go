package llamacpp

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// The n_indent rule cuts the first under-indented line after the first
// where its text starts, whatever way the text arrives in pieces.
func TestLineGuardIndent(t *testing.T) {
	for _, c := range []struct {
		text    string
		indent  int
		keep    string
		stopped bool
	}{
		{"x = 1\n    y = 2\n    z\n", 4, "x = 1\n    y = 2\n    z\n", false},
		{"x = 1\n    y = 2\nreturn y\n", 4, "x = 1\n    y = 2\n", true},
		{"x = 1\n  y\n", 4, "x = 1\n  ", true},
		{"x = 1\n\n    y\n", 4, "x = 1\n", true},         // an empty line is not indented
		{"first line only", 8, "first line only", false}, // the first line is never checked
		{"a\n\tb\n", 1, "a\n\tb\n", false},               // a tab counts as one
		{"a\nb\n", 0, "a\nb\n", false},                   // n_indent 0: off
	} {
		for _, size := range []int{1, 2, 3, 100} {
			g := lineGuard{nIndent: c.indent}
			var got []byte
			stop := ""
			for i := 0; i < len(c.text) && stop == ""; i += size {
				var keep []byte
				keep, stop = g.push([]byte(c.text[i:min(i+size, len(c.text))]), false)
				got = append(got, keep...)
			}
			if string(got) != c.keep || (stop == guardIndent) != c.stopped {
				t.Errorf("%q n_indent %d in pieces of %d: kept %q (stop %q), want %q (stopped %v)", c.text, c.indent, size, got, stop, c.keep, c.stopped)
			}
		}
	}
}

// Overtime, a piece with a newline ends the completion, kept whole; a
// piece without one does not.
func TestLineGuardOvertime(t *testing.T) {
	g := lineGuard{}
	if keep, stop := g.push([]byte("abc"), true); string(keep) != "abc" || stop != "" {
		t.Fatalf("no newline: %q %q", keep, stop)
	}
	if keep, stop := g.push([]byte("d\ne"), true); string(keep) != "d\ne" || stop != guardTime {
		t.Fatalf("newline overtime: %q %q", keep, stop)
	}
	if _, stop := (&lineGuard{}).push([]byte("d\ne"), false); stop != "" {
		t.Fatalf("newline in time stopped: %q", stop)
	}
}

// response_fields flattens nested paths under their full name and leaves
// out what names nothing, as llama.cpp's json_get_nested_values does.
func TestSelectFieldsFlattensPaths(t *testing.T) {
	full := []byte(`{"content":"hi","timings":{"prompt_n":3,"predicted_ms":1.5},"generation_settings":{"n_predict":8}}`)
	b, err := selectFields(full, []string{"content", "timings/prompt_n", "generation_settings/n_predict", "nope", "timings/nope", "content/x", ""})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	json.Unmarshal(b, &got)
	want := map[string]string{"content": `"hi"`, "timings/prompt_n": "3", "generation_settings/n_predict": "8"}
	if len(got) != len(want) {
		t.Fatalf("got %s", b)
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
}

// Prompt shapes as llama.cpp reads them: how many prompts, and the tokens
// of the first.
func TestParsePromptsShapes(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	for _, c := range []struct {
		raw     string
		prompts int
		first   []engine.Token
		bad     bool
	}{
		{raw: `"ab"`, prompts: 1, first: []engine.Token{tasktest.FakeBOS, 'a', 'b'}},
		{raw: `[1, 2, 3]`, prompts: 1, first: []engine.Token{1, 2, 3}},
		{raw: `[1, "ab", 2]`, prompts: 1, first: []engine.Token{1, 'a', 'b', 2}},
		{raw: `["ab", 2]`, prompts: 1, first: []engine.Token{tasktest.FakeBOS, 'a', 'b', 2}},
		{raw: `["ab", "c"]`, prompts: 2, first: []engine.Token{tasktest.FakeBOS, 'a', 'b'}},
		{raw: `[[1, 2], "c", [3, "d"]]`, prompts: 3, first: []engine.Token{1, 2}},
		{raw: `"<|fim_prefix|>"`, prompts: 1, first: []engine.Token{tasktest.FakeBOS, tasktest.FakeFIMPrefix}},
		{raw: ``, bad: true},
		{raw: `null`, bad: true},
		{raw: `[]`, bad: true},
		{raw: `[[]]`, bad: true},
		{raw: `5`, bad: true},
		{raw: `[1.5]`, bad: true},
		{raw: `[-1]`, bad: true},
		{raw: `[99999]`, bad: true}, // outside the vocabulary
		{raw: `[{"prompt_string": "x"}]`, prompts: 1, first: []engine.Token{tasktest.FakeBOS, 'x'}},
		{raw: `{"prompt_string": "x", "multimodal_data": []}`, prompts: 1, first: []engine.Token{tasktest.FakeBOS, 'x'}},
		{raw: `{"prompt_string": 5}`, bad: true},
		{raw: `{"prompt_string": "x", "other": 1}`, bad: true},
		{raw: `{"prompt_string": "x", "multimodal_data": "aGk="}`, bad: true},
		{raw: `{"prompt_string": "x", "multimodal_data": [5]}`, bad: true},
		{raw: `{"prompt_string": "x", "multimodal_data": ["!!!"]}`, bad: true},
		{raw: `[true]`, bad: true},
		{raw: `[[1], 2]`, bad: true},
	} {
		prompts, err := wire.ParsePrompts(json.RawMessage(c.raw), "prompt")
		var first []engine.Token
		if err == nil {
			first, err = wire.PromptTokens(m, prompts[0], "prompt")
		}
		if c.bad {
			if err == nil {
				t.Errorf("%s: accepted", c.raw)
			}
			continue
		}
		if err != nil || len(prompts) != c.prompts || !slices.Equal(first, c.first) {
			t.Errorf("%s: %d prompts, first %v, err %v; want %d, %v", c.raw, len(prompts), first, err, c.prompts, c.first)
		}
	}
}

// logit_bias: pairs or an object, ids or text, numbers or false.
func TestParseLlamaBias(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	got, err := parseBias(m, json.RawMessage(`[[65, 1.5], ["bc", false]]`))
	if err != nil || len(got) != 3 || got[0] != (engine.LogitBias{Token: 65, Bias: 1.5}) ||
		got[1].Token != 'b' || !math.IsInf(float64(got[2].Bias), -1) {
		t.Fatalf("pairs: %v %v", got, err)
	}
	got, err = parseBias(m, json.RawMessage(`{"66": -2, "z": false}`))
	if err != nil || len(got) != 2 {
		t.Fatalf("object: %v %v", got, err)
	}
	for _, bad := range []string{`[[65]]`, `[[65, 101]]`, `[[65, true]]`, `[[99999, 1]]`, `{"-1": 1}`, `"x"`, `[[1.5, 1]]`} {
		if _, err := parseBias(m, json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// Absent fields take llama.cpp's defaults; a negative temperature is
// greedy; seed -1 is random.
func TestLlamaSamplingDefaults(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	s, err := samplingOf(m, &completionRequest{})
	if err != nil || s.Temperature != 0.8 || s.TopK != 40 || s.TopP != 0.95 || s.MinP != 0.05 || s.PenaltyLastN != 64 || s.RepeatPenalty != 1 {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	neg, seed := -1.0, int64(-1)
	s, err = samplingOf(m, &completionRequest{Temperature: &neg, Seed: &seed})
	if err != nil || s.Temperature != 0 {
		t.Fatalf("negative temperature: %+v %v", s, err)
	}
	seed = -2
	if _, err := samplingOf(m, &completionRequest{Seed: &seed}); err == nil {
		t.Fatal("seed -2 accepted")
	}
}

// The warm-up samples one greedy token, with nothing that could slow it.
func TestWarmupJobIsOneGreedyToken(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	req := decodeRequest(t, `{"input_extra":[{"filename":"a.go","text":"package a\n"}],"n_predict":0,"n_probs":3,"logit_bias":[[65,2]]}`)
	j, p, err := infillJob(m, req)
	if err != nil {
		t.Fatal(err)
	}
	g := j.spec
	if !p.warmup || g.MaxTokens != 1 || g.Sampling != engine.Greedy() || g.Bias != nil || g.Logprobs != 0 || g.Class != sched.FIM || j.cacheKey != "" {
		t.Fatalf("warm-up spec %+v, key %q", g, j.cacheKey)
	}
}

// Only greedy whole-response infills may come from the completion cache,
// and the key tells apart what changes the answer.
func TestInfillCacheKey(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	key := func(body string) string {
		j, _, err := infillJob(m, decodeRequest(t, body))
		if err != nil {
			t.Fatal(err)
		}
		return j.cacheKey
	}
	base := key(`{"input_prefix":"a","input_suffix":"b","temperature":0,"n_predict":8}`)
	if base == "" {
		t.Fatal("a greedy infill has no cache key")
	}
	if key(`{"input_prefix":"a","input_suffix":"b","temperature":0,"n_predict":8,"seed":5}`) != base {
		t.Error("the seed changed a greedy key")
	}
	for _, body := range []string{
		`{"input_prefix":"a","input_suffix":"b","temperature":0,"n_predict":8,"n_indent":2}`,
		`{"input_prefix":"a","input_suffix":"b","temperature":0,"n_predict":9}`,
		`{"input_prefix":"a","input_suffix":"b","temperature":0,"n_predict":8,"repeat_penalty":1.2}`,
	} {
		if k := key(body); k == base || k == "" {
			t.Errorf("%s: key %q", body, k)
		}
	}
	for _, body := range []string{
		`{"input_prefix":"a","input_suffix":"b","n_predict":8}`,
		`{"input_prefix":"a","input_suffix":"b","temperature":0,"n_predict":8,"stream":true}`,
		`{"input_prefix":"a","input_suffix":"b","temperature":0,"n_predict":8,"n_probs":1}`,
	} {
		if k := key(body); k != "" {
			t.Errorf("%s is cacheable", body)
		}
	}
}

// A vocabulary without FIM tokens gets task.FIMPrompt's 501 from /infill (and
// from /v1/completions with a suffix: package http's test).
func TestInfillWithoutFIMTokens(t *testing.T) {
	m := tasktest.FakeModel(t, false)
	if _, _, err := infillJob(m, decodeRequest(t, `{"input_prefix":"a"}`)); wire.AsError(err).Status != 501 {
		t.Fatalf("/infill: %v", err)
	}
}

// The completion cache keeps answers under different grammars apart.
func TestInfillCacheKeyHasTheGrammar(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	key := func(extra string) string {
		var req completionRequest
		if err := json.Unmarshal([]byte(infillBody(`,"temperature":0`+extra)), &req); err != nil {
			t.Fatal(err)
		}
		j, _, err := infillJob(m, &req)
		if err != nil {
			t.Fatal(err)
		}
		return j.cacheKey
	}
	plain, a, b := key(""), key(`,"grammar":"root ::= \"a\""`), key(`,"grammar":"root ::= \"b\""`)
	if plain == "" || a == "" || plain == a || a == b {
		t.Fatalf("cache keys %q %q %q should differ", plain, a, b)
	}
}

func infillBody(extra string) string {
	return `{"input_prefix":"def f():\n","input_suffix":"\n","prompt":"  re"` + extra + `}`
}

func decodeRequest(t testing.TB, body string) *completionRequest {
	t.Helper()
	var req completionRequest
	if err := decodeBody([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// A prompt object with images on a model without a vision projector is a
// 400 naming prompt.multimodal_data; so is a file that is not an image on
// any model (checked before a projector would see it).
func TestCompletionMultimodalRefused(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	for _, raw := range []string{
		`{"prompt": {"prompt_string": "look: <__media__> now", "multimodal_data": ["aGVsbG8="]}}`,
		`{"prompt": [{"prompt_string": "a <__media__> b", "multimodal_data": ["iVBORw0KGgo="]}, "plain"]}`,
	} {
		var req completionRequest
		if err := json.Unmarshal([]byte(raw), &req); err != nil {
			t.Fatal(err)
		}
		_, _, err := completionJobs(m, &req, sched.Chat)
		var te *task.Error
		if !errors.As(err, &te) || te.Kind != task.Invalid || te.Param != "prompt.multimodal_data" {
			t.Errorf("%s: %v, want a 400 on prompt.multimodal_data", raw, err)
		}
	}
}
