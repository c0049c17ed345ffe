package http

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// Poison values through the real handlers on every API: each is refused
// with a 400 in the API's own shape naming the field, or normalized into
// what it means before it reaches the scheduler. The scheduler is the
// recording stub: what it was handed is exactly what the engine would get.

// watchText is the fake vocabulary, remembering the longest text it was
// asked to tokenize (a refused prompt must never get that far).
type watchText struct {
	tasktest.FakeText
	mu      sync.Mutex
	longest int
}

func (w *watchText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	w.mu.Lock()
	w.longest = max(w.longest, len(text))
	w.mu.Unlock()
	return w.FakeText.Tokenize(text, addSpecial, parseSpecial)
}

func (w *watchText) longestText() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

// poisonServer serves a FIM-capable model with ChatML over the fake
// vocabulary (context 512: prompts of more than 8 KiB are refused unread).
func poisonServer(t *testing.T, rec engine.ModelSampling) (*Model, *tasktest.StubSched, *watchText, func(method, path, body string) (int, []byte)) {
	t.Helper()
	m := fakeModel(t, true)
	tmpl, err := chat.Parse(chat.ChatML, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sc, wt := &tasktest.StubSched{}, &watchText{}
	d := *m.Desc
	d.Recommended = rec
	m.Desc, m.Chat, m.Sched, m.Text = &d, tmpl, sc, wt
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetModel(m)
	c := memServer(t, s)
	return m, sc, wt, func(method, path, body string) (int, []byte) {
		status, _, b := call(t, c, method, path, body)
		return status, b
	}
}

// Request bodies: a minimal valid request of each endpoint with extra
// fields spliced in.
func oaiChatBody(extra string) string {
	return `{"model":"fake","messages":[{"role":"user","content":"hi"}]` + extra + `}`
}
func oaiCmplBody(extra string) string { return `{"model":"fake","prompt":"hi"` + extra + `}` }
func llamaBody(extra string) string   { return `{"prompt":"hi"` + extra + `}` }
func infillBody(extra string) string {
	return `{"input_prefix":"def f():\n","input_suffix":"\n","prompt":"  re"` + extra + `}`
}
func ollamaGenBody(extra string) string {
	return `{"model":"fake","prompt":"hi","stream":false` + extra + `}`
}
func ollamaChatBody(extra string) string {
	return `{"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":false` + extra + `}`
}
func anthropicBody(extra string) string {
	return `{"model":"fake","max_tokens":8,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
}

// banAllText bans the ASCII bytes through a text key (every token of the
// text) and the rest by id.
func banAllText() string {
	var ascii strings.Builder
	for b := 1; b < 128; b++ {
		ascii.WriteByte(byte(b))
	}
	key, _ := json.Marshal(ascii.String())
	parts := []string{fmt.Sprintf("[%s,false]", key), "[0,false]"}
	for i := 128; i < tasktest.FakeVocab; i++ {
		parts = append(parts, fmt.Sprintf("[%d,false]", i))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

type poisonCase struct {
	path, body string
	// field is the one a refusal must name; "" when the request is
	// accepted, and then check sees what reached the scheduler.
	field string
	check func(r sched.Request) string
}

func greedy(r sched.Request) string {
	if r.Sampling.Temperature != 0 {
		return fmt.Sprintf("temperature %v, want greedy (0)", r.Sampling.Temperature)
	}
	return ""
}

func accepted(r sched.Request) string { return "" }

func penaltyWindowIs(n int32) func(sched.Request) string {
	return func(r sched.Request) string {
		if r.Sampling.PenaltyLastN != n {
			return fmt.Sprintf("penalty window %d, want %d", r.Sampling.PenaltyLastN, n)
		}
		return ""
	}
}

func runPoisonCases(t *testing.T, cases []poisonCase) {
	_, sc, _, do := poisonServer(t, engine.ModelSampling{})
	for _, c := range cases {
		name := c.path + " " + c.body
		if len(name) > 160 {
			name = name[:160] + "…"
		}
		status, b := do("POST", c.path, c.body)
		taken := sc.Taken()
		kind := kindOfPath(c.path)
		if c.field == "" {
			if len(taken) == 0 {
				t.Errorf("%s: refused (%d %s), want it accepted", name, status, b)
				continue
			}
			if msg := c.check(taken[0]); msg != "" {
				t.Errorf("%s: %s", name, msg)
			}
			if msg := tasktest.Unschedulable(&engine.Descriptor{Vocab: tasktest.FakeVocab, Ctx: 512}, &taken[0]); msg != "" {
				t.Errorf("%s: handed the scheduler what it refuses (%s): %+v", name, msg, taken[0])
			}
			continue
		}
		if len(taken) != 0 {
			t.Errorf("%s: reached the scheduler (%+v), want a 400 naming %s", name, taken[0].Sampling, c.field)
			continue
		}
		if status != 400 {
			t.Errorf("%s: status %d %s, want 400 naming %s", name, status, b, c.field)
			continue
		}
		msg := errorShapeOf(t, kind, status, b)
		if !strings.Contains(msg, c.field) {
			t.Errorf("%s: %q does not name %s", name, msg, c.field)
		}
		if kind == wire.OpenAI {
			var e struct {
				Error struct {
					Param *string `json:"param"`
				} `json:"error"`
			}
			if json.Unmarshal(b, &e) != nil || e.Error.Param == nil || *e.Error.Param != c.field {
				t.Errorf("%s: OpenAI param in %s, want %q", name, b, c.field)
			}
		}
	}
}

// Numbers no field can take, on every API: denormal temperatures are
// greedy, the rest are 400s naming the field — overflowing JSON numbers
// included.
func TestPoisonNumbers(t *testing.T) {
	var cases []poisonCase
	// Temperature, every API.
	for _, b := range []func(string) string{oaiChatBody, oaiCmplBody, llamaBody, infillBody, anthropicBody} {
		path := map[string]string{
			oaiChatBody(""): "/v1/chat/completions", oaiCmplBody(""): "/v1/completions", llamaBody(""): "/completion",
			infillBody(""): "/infill", anthropicBody(""): "/v1/messages",
		}[b("")]
		cases = append(cases,
			poisonCase{path, b(`,"temperature":1e-40`), "", greedy},
			poisonCase{path, b(`,"temperature":5e-324`), "", greedy},
			poisonCase{path, b(`,"temperature":9e-6`), "", greedy},
			poisonCase{path, b(`,"temperature":1e400`), "temperature", nil},
			poisonCase{path, b(`,"top_k":1e30`), "top_k", nil},
			poisonCase{path, b(`,"top_k":-1`), "top_k", nil},
			poisonCase{path, b(`,"top_p":1e-50`), "top_p", nil},
			poisonCase{path, b(`,"top_p":0`), "top_p", nil},
			poisonCase{path, b(`,"top_p":1e400`), "top_p", nil},
			poisonCase{path, b(`,"max_tokens":1e30`), "max_tokens", nil},
			poisonCase{path, b(`,"max_tokens":-2`), "max_tokens", nil},
			poisonCase{path, b(`,"max_tokens":4294967296`), "max_tokens", nil},
		)
		if path != "/v1/messages" { // Anthropic's sampling fields are temperature, top_k and top_p
			cases = append(cases,
				poisonCase{path, b(`,"temperature":-1e-40`), map[bool]string{true: "", false: "temperature"}[path == "/completion" || path == "/infill"], greedy},
				poisonCase{path, b(`,"temperature":101`), "temperature", nil},
				poisonCase{path, b(`,"min_p":1.5`), "min_p", nil},
				poisonCase{path, b(`,"min_p":-1e-300`), "min_p", nil},
				poisonCase{path, b(`,"repeat_penalty":1e-40`), "repeat_penalty", nil},
				poisonCase{path, b(`,"repeat_penalty":0`), "repeat_penalty", nil},
				poisonCase{path, b(`,"repeat_penalty":11`), "repeat_penalty", nil},
				poisonCase{path, b(`,"frequency_penalty":1e300`), "frequency_penalty", nil},
				poisonCase{path, b(`,"presence_penalty":-3`), "presence_penalty", nil},
				poisonCase{path, b(`,"seed":1e30`), "seed", nil},
				poisonCase{path, b(`,"seed":18446744073709551616`), "seed", nil},
				poisonCase{path, b(`,"seed":1.5`), "seed", nil},
				poisonCase{path, b(`,"top_k":3000000000`), "", func(r sched.Request) string {
					if r.Sampling.TopK != math.MaxInt32 {
						return fmt.Sprintf("top_k %d, want it clamped to %d", r.Sampling.TopK, math.MaxInt32)
					}
					return ""
				}},
			)
		}
	}
	cases = append(cases,
		// OpenAI.
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"n":1e30`), "n", nil},
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"n":17`), "n", nil},
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"n":0`), "n", nil},
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"max_completion_tokens":-5`), "max_completion_tokens", nil},
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"logprobs":true,"top_logprobs":21`), "top_logprobs", nil},
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"logprobs":true,"top_logprobs":-1`), "top_logprobs", nil},
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"logprobs":true,"top_logprobs":1e30`), "top_logprobs", nil},
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"seed":-5`), "", accepted},
		poisonCase{"/v1/completions", oaiCmplBody(`,"n":1e30`), "n", nil},
		poisonCase{"/v1/completions", oaiCmplBody(`,"best_of":1e30`), "best_of", nil},
		poisonCase{"/v1/completions", oaiCmplBody(`,"logprobs":6`), "logprobs", nil},
		poisonCase{"/v1/completions", oaiCmplBody(`,"logprobs":-1`), "logprobs", nil},
		// llama.cpp.
		poisonCase{"/completion", llamaBody(`,"n_predict":1e30`), "n_predict", nil},
		poisonCase{"/completion", llamaBody(`,"n_predict":-2`), "n_predict", nil},
		poisonCase{"/completion", llamaBody(`,"n_probs":21`), "n_probs", nil},
		poisonCase{"/completion", llamaBody(`,"n_probs":-1`), "n_probs", nil},
		poisonCase{"/completion", llamaBody(`,"n_probs":1e30`), "n_probs", nil},
		poisonCase{"/completion", llamaBody(`,"seed":-2`), "seed", nil},
		poisonCase{"/completion", llamaBody(`,"seed":-1`), "", accepted},
		poisonCase{"/completion", llamaBody(`,"repeat_last_n":-2`), "repeat_last_n", nil},
		poisonCase{"/completion", llamaBody(`,"repeat_last_n":1e30`), "repeat_last_n", nil},
		poisonCase{"/completion", llamaBody(`,"repeat_last_n":2000000000,"repeat_penalty":1.1`), "", penaltyWindowIs(512)},
		poisonCase{"/completion", llamaBody(`,"repeat_last_n":-1`), "", penaltyWindowIs(-1)},
		poisonCase{"/completion", llamaBody(`,"t_max_predict_ms":1e30`), "t_max_predict_ms", nil},
		poisonCase{"/completion", llamaBody(`,"t_max_prompt_ms":864000000000`), "t_max_prompt_ms", nil},
		poisonCase{"/completion", llamaBody(`,"n_indent":1e30`), "n_indent", nil},
		poisonCase{"/completion", llamaBody(`,"id_slot":1e30`), "id_slot", nil},
		poisonCase{"/infill", infillBody(`,"n_predict":1e30`), "n_predict", nil},
		// Ollama: options are typed as Ollama types them.
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"temperature":1e-40}`), "", greedy},
		poisonCase{"/api/chat", ollamaChatBody(`,"options":{"temperature":1e-40}`), "", greedy},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"temperature":1e400}`), "temperature", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"temperature":101}`), "temperature", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"top_p":1e-50}`), "top_p", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"repeat_penalty":1e-40}`), "repeat_penalty", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"num_predict":1e30}`), "num_predict", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"seed":1e30}`), "seed", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"num_predict":1e15}`), "", func(r sched.Request) string {
			if r.MaxTokens != 512 {
				return fmt.Sprintf("max tokens %d, want the context (512)", r.MaxTokens)
			}
			return ""
		}},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"repeat_last_n":1e15,"repeat_penalty":1.1}`), "", penaltyWindowIs(512)},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"repeat_last_n":-2}`), "repeat_last_n", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"logprobs":true,"top_logprobs":21`), "top_logprobs", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"top_logprobs":1e30`), "top_logprobs", nil},
		// Anthropic.
		poisonCase{"/v1/messages", anthropicBody(`,"temperature":1.5`), "temperature", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"temperature":-1e-40`), "temperature", nil},
	)
	runPoisonCases(t, cases)
}

// A logit bias that leaves nothing to sample is a 400 naming logit_bias,
// in every form the APIs write it; one that leaves a token is served.
func TestPoisonBiasBansEveryToken(t *testing.T) {
	bansOnly := func(n int) func(sched.Request) string {
		return func(r sched.Request) string {
			banned := 0
			for _, b := range r.Bias {
				if math.IsInf(float64(b.Bias), -1) {
					banned++
				}
			}
			if banned != n {
				return fmt.Sprintf("%d tokens banned, want %d", banned, n)
			}
			return ""
		}
	}
	allButEOS := tasktest.BanAllObject(tasktest.FakeVocab, "false", tasktest.FakeEOS)
	runPoisonCases(t, []poisonCase{
		{"/completion", llamaBody(`,"temperature":1,"logit_bias":` + tasktest.BanAllPairs(tasktest.FakeVocab)), "logit_bias", nil},
		{"/completion", llamaBody(`,"temperature":0,"logit_bias":` + tasktest.BanAllPairs(tasktest.FakeVocab)), "logit_bias", nil},
		{"/completion", llamaBody(`,"temperature":1,"logit_bias":` + tasktest.BanAllObject(tasktest.FakeVocab, "false")), "logit_bias", nil},
		{"/completion", llamaBody(`,"temperature":1,"logit_bias":` + banAllText()), "logit_bias", nil},
		{"/infill", infillBody(`,"temperature":1,"logit_bias":` + tasktest.BanAllPairs(tasktest.FakeVocab)), "logit_bias", nil},
		// ignore_eos bans the one token the bias left.
		{"/completion", llamaBody(`,"temperature":1,"ignore_eos":true,"logit_bias":` + allButEOS), "logit_bias", nil},
		{"/completion", llamaBody(`,"temperature":1,"logit_bias":` + allButEOS), "", bansOnly(tasktest.FakeVocab - 1)},
		// OpenAI's -100 is a ban, as OpenAI documents it.
		{"/v1/chat/completions", oaiChatBody(`,"logit_bias":` + tasktest.BanAllObject(tasktest.FakeVocab, "-100")), "logit_bias", nil},
		{"/v1/completions", oaiCmplBody(`,"logit_bias":` + tasktest.BanAllObject(tasktest.FakeVocab, "-100")), "logit_bias", nil},
		{"/v1/chat/completions", oaiChatBody(`,"logit_bias":` + tasktest.BanAllObject(tasktest.FakeVocab, "-100", tasktest.FakeEOS)), "", bansOnly(tasktest.FakeVocab - 1)},
		{"/v1/chat/completions", oaiChatBody(`,"logit_bias":{"65":-99.5}`), "", bansOnly(0)},
		{"/v1/chat/completions", oaiChatBody(`,"logit_bias":{"65":1e400}`), "logit_bias", nil},
		{"/v1/chat/completions", oaiChatBody(`,"logit_bias":{"65":101}`), "logit_bias", nil},
		{"/v1/chat/completions", oaiChatBody(`,"logit_bias":{"99999":1}`), "logit_bias", nil},
		{"/completion", llamaBody(`,"logit_bias":[[65,1e400]]`), "logit_bias", nil},
		{"/completion", llamaBody(`,"logit_bias":[[65,true]]`), "logit_bias", nil},
		{"/completion", llamaBody(`,"logit_bias":[[1e30,1]]`), "logit_bias", nil},
	})
}

// Fields the server does not honour are refused by name; their neutral
// values (what clients send by habit) are accepted.
func TestUnhonouredFieldsRefused(t *testing.T) {
	var cases []poisonCase
	llamaFields := []struct{ field, bad, neutral string }{
		{"mirostat", `2`, `0`},
		{"typical_p", `0.5`, `1`},
		{"dynatemp_range", `0.5`, `0`},
		{"xtc_probability", `0.5`, `0`},
		{"dry_multiplier", `0.8`, `0`},
		{"top_n_sigma", `1`, `-1`},
		{"min_keep", `5`, `0`},
		{"post_sampling_probs", `true`, `false`},
		{"n_cmpl", `2`, `1`},
		{"lora", `[{"id":0,"scale":1}]`, `[]`},
		{"multimodal_data", `["aGk="]`, `[]`},
	}
	for _, ep := range []struct {
		path string
		body func(string) string
	}{{"/completion", llamaBody}, {"/infill", infillBody}, {"/v1/completions", oaiCmplBody}, {"/v1/chat/completions", oaiChatBody}} {
		for _, f := range llamaFields {
			cases = append(cases,
				poisonCase{ep.path, ep.body(`,"` + f.field + `":` + f.bad), f.field, nil},
				poisonCase{ep.path, ep.body(`,"` + f.field + `":` + f.neutral), "", accepted})
		}
	}
	for _, f := range []struct{ field, bad, neutral string }{
		{"tools", `[{"type":"function","function":{"name":"a b"}}]`, `[]`},
		{"tool_choice", `"required"`, `"auto"`},
		{"tool_choice", `{"type":"function","function":{"name":"f"}}`, `"none"`},
		{"parallel_tool_calls", `"yes"`, `true`},
		{"functions", `[{"name":"a b"}]`, `[]`},
		{"function_call", `{"name":"f"}`, `"none"`},
		{"audio", `{"voice":"alloy","format":"wav"}`, `null`},
		{"modalities", `["text","audio"]`, `["text"]`},
		{"reasoning_effort", `"bogus"`, `"low"`},
		{"verbosity", `"low"`, `null`},
		{"web_search_options", `{}`, `null`},
		{"chat_template_kwargs", `"nope"`, `{"enable_thinking":false}`},
	} {
		cases = append(cases,
			poisonCase{"/v1/chat/completions", oaiChatBody(`,"` + f.field + `":` + f.bad), f.field, nil},
			poisonCase{"/v1/chat/completions", oaiChatBody(`,"` + f.field + `":` + f.neutral), "", accepted})
	}
	// Fields that do not change the reply are ignored, as OpenAI ignores
	// what it does not know.
	cases = append(cases,
		poisonCase{"/v1/chat/completions", oaiChatBody(`,"metadata":{"a":"b"},"store":false,"service_tier":"auto","prediction":{"type":"content","content":"x"},"no_such_field":1`), "", accepted},
		// Anthropic.
		poisonCase{"/v1/messages", anthropicBody(`,"tools":[{"name":"a b","input_schema":{"type":"object"}}]`), "tools", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"tools":[]`), "", accepted},
		poisonCase{"/v1/messages", anthropicBody(`,"tool_choice":{"type":"any"}`), "tool_choice", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"tool_choice":{"type":"tool","name":"f"}`), "tool_choice", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"tool_choice":{"type":"auto"}`), "", accepted},
		poisonCase{"/v1/messages", anthropicBody(`,"thinking":{"type":"enabled","budget_tokens":10}`), "thinking", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"thinking":{"type":"disabled"}`), "", accepted},
		poisonCase{"/v1/messages", anthropicBody(`,"mcp_servers":[{"type":"url","url":"http://x"}]`), "mcp_servers", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"metadata":{"user_id":"u"},"service_tier":"auto"`), "", accepted},
		// Ollama.
		poisonCase{"/api/chat", ollamaChatBody(`,"tools":[{"type":"function","function":{"name":"a b"}}]`), "tools", nil},
		poisonCase{"/api/chat", ollamaChatBody(`,"think":"maybe"`), "think", nil},
		poisonCase{"/api/chat", ollamaChatBody(`,"think":false`), "", accepted},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"typical_p":0.5}`), "typical_p", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"options":{"typical_p":1,"num_keep":4,"num_thread":2}`), "", accepted},
	)
	runPoisonCases(t, cases)
}

// Prompt text beyond promptBytesPerToken bytes per token of the context is
// refused before the tokenizer sees it, on every API — the sum over a
// chat's messages included; FIM inputs are cut to what could fit instead,
// since the FIM format truncates them anyway.
func TestPromptBytesRefusedBeforeTokenizing(t *testing.T) {
	m, sc, wt, do := poisonServer(t, engine.ModelSampling{})
	limit := task.MaxPromptBytes(m.Model.Desc)
	if limit != 16*512 {
		t.Fatalf("limit %d for a context of 512", limit)
	}
	big := strings.Repeat("a", limit+1)
	half := strings.Repeat("b", limit/2+1)
	two := `[{"role":"user","content":"` + half + `"},{"role":"assistant","content":"ok"},{"role":"user","content":"` + half + `"}]`
	for _, c := range []struct{ path, body, field string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + big + `"}]}`, "messages"},
		{"/v1/chat/completions", `{"messages":` + two + `}`, "messages"},
		{"/v1/completions", `{"prompt":"` + big + `"}`, "prompt"},
		{"/v1/completions", `{"prompt":["x","` + big + `"]}`, "prompt"},
		{"/completion", `{"prompt":"` + big + `"}`, "prompt"},
		{"/completion", `{"prompt":[1,2,"` + half + `",3,"` + half + `"]}`, "prompt"},
		{"/api/generate", `{"model":"fake","prompt":"` + big + `","raw":true}`, "prompt"},
		{"/api/generate", `{"model":"fake","prompt":"` + big + `"}`, "messages"},
		{"/api/generate", `{"model":"fake","prompt":"` + big + `","context":[1,2]}`, "messages"},
		{"/api/chat", `{"model":"fake","messages":` + two + `}`, "messages"},
		{"/v1/messages", `{"model":"fake","max_tokens":8,"messages":` + two + `}`, "messages"},
		{"/v1/messages/count_tokens", `{"model":"fake","messages":[{"role":"user","content":"` + big + `"}]}`, "messages"},
	} {
		status, b := do("POST", c.path, c.body)
		if status != 400 {
			t.Errorf("%s with %d bytes: %d %.200s", c.path, len(c.body), status, b)
			continue
		}
		if msg := errorShapeOf(t, kindOfPath(c.path), status, b); !strings.Contains(msg, "bytes") {
			t.Errorf("%s: %q does not say the prompt is too long", c.path, msg)
		}
		if kindOfPath(c.path) == wire.OpenAI && !strings.Contains(string(b), `"param":"`+c.field+`"`) {
			t.Errorf("%s: %s does not name %s", c.path, b, c.field)
		}
		if n := wt.longestText(); n > limit {
			t.Errorf("%s: the tokenizer was given %d bytes (limit %d)", c.path, n, limit)
		}
	}
	if got := sc.Taken(); len(got) != 0 {
		t.Errorf("%d oversized prompts reached the scheduler", len(got))
	}
	// FIM: whole files around the cursor are cut, then fitted.
	huge := strings.Repeat("x = 1\n", 20000)
	extra := `[{"filename":"old.py","text":"` + strings.Repeat("y", 3*limit) + `"},{"filename":"new.py","text":"z = 2\n"}]`
	for _, c := range []struct{ path, body string }{
		{"/infill", `{"input_prefix":` + jsonString(huge) + `,"input_suffix":` + jsonString(huge) + `,"input_extra":` + extra + `,"prompt":"  re","n_predict":8}`},
		{"/v1/completions", `{"prompt":` + jsonString(huge) + `,"suffix":` + jsonString(huge) + `,"max_tokens":8}`},
		{"/api/generate", `{"model":"fake","prompt":` + jsonString(huge) + `,"suffix":` + jsonString(huge) + `,"stream":false}`},
	} {
		do("POST", c.path, c.body)
		got := sc.Taken()
		if len(got) != 1 {
			t.Errorf("%s: a FIM request around a %d-byte file was not served", c.path, len(huge))
			continue
		}
		if n := wt.longestText(); n > limit {
			t.Errorf("%s: the tokenizer was given %d bytes (limit %d)", c.path, n, limit)
		}
		if len(got[0].Prompt) >= 512 {
			t.Errorf("%s: prompt of %d tokens", c.path, len(got[0].Prompt))
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Omitted top_k, top_p and min_p take the model's recommendation on every
// API, else llama-server's 40, 0.95, 0.05; explicit values win.
func TestSamplingDefaultsOnEveryAPI(t *testing.T) {
	endpoints := []struct {
		path     string
		body     func(string) string
		explicit string // top_k 7, top_p 0.5, min_p 0.25 where the API has them
		minP     bool   // the API has min_p
	}{
		{"/v1/chat/completions", oaiChatBody, `,"top_k":7,"top_p":0.5,"min_p":0.25`, true},
		{"/v1/completions", oaiCmplBody, `,"top_k":7,"top_p":0.5,"min_p":0.25`, true},
		{"/completion", llamaBody, `,"top_k":7,"top_p":0.5,"min_p":0.25`, true},
		{"/infill", infillBody, `,"top_k":7,"top_p":0.5,"min_p":0.25`, true},
		{"/api/generate", ollamaGenBody, `,"options":{"top_k":7,"top_p":0.5,"min_p":0.25}`, true},
		{"/api/chat", ollamaChatBody, `,"options":{"top_k":7,"top_p":0.5,"min_p":0.25}`, true},
		{"/v1/messages", anthropicBody, `,"top_k":7,"top_p":0.5`, false},
	}
	type want struct {
		k    int32
		p, m float32
	}
	for _, c := range []struct {
		name string
		rec  engine.ModelSampling
		want want
	}{
		{"llama-server's", engine.ModelSampling{}, want{40, 0.95, 0.05}},
		{"recommended", engine.ModelSampling{TopK: 20, TopP: 0.8, MinP: 0, HasTopK: true, HasTopP: true, HasMinP: true}, want{20, 0.8, 0}},
		{"partly recommended", engine.ModelSampling{TopP: 0.7, HasTopP: true}, want{40, 0.7, 0.05}},
		{"unusable recommendation", engine.ModelSampling{TopK: -3, TopP: 0, MinP: float32(math.NaN()), HasTopK: true, HasTopP: true, HasMinP: true}, want{40, 0.95, 0.05}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, sc, _, do := poisonServer(t, c.rec)
			for _, ep := range endpoints {
				for _, explicit := range []bool{false, true} {
					body := ep.body("")
					w := c.want
					if explicit {
						body = ep.body(ep.explicit)
						w.k, w.p = 7, 0.5
						if ep.minP {
							w.m = 0.25
						}
					}
					status, b := do("POST", ep.path, body)
					got := sc.Taken()
					if len(got) != 1 {
						t.Errorf("%s: not scheduled: %d %s", ep.path, status, b)
						continue
					}
					s := got[0].Sampling
					if s.TopK != w.k || s.TopP != w.p || s.MinP != w.m {
						t.Errorf("%s (explicit %v): top_k %d top_p %v min_p %v, want %d %v %v", ep.path, explicit, s.TopK, s.TopP, s.MinP, w.k, w.p, w.m)
					}
				}
			}
		})
	}
}
