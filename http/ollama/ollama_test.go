package ollama

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"superfluid/chat"
	"superfluid/gguf"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

func rawOptions(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Options follow Ollama's FromMap: any number for an int (fraction
// dropped), nothing but a number for a float, arrays of strings for stop,
// null for "default", unknown keys ignored, and known-but-unused keys
// type-checked.
func TestParseOllamaOptions(t *testing.T) {
	o, err := parseOptions(rawOptions(t, `{"num_predict":12.9,"temperature":0,"top_k":null,"seed":9007199254740993,
		"stop":["a","b"],"mirostat":"whatever","num_gpu":1,"use_mmap":false,"num_ctx":1e9}`))
	if err != nil {
		t.Fatal(err)
	}
	if *o.NumPredict != 12 || *o.Temperature != 0 || o.TopK != nil || *o.Seed != 9007199254740993 || len(o.Stop) != 2 {
		t.Errorf("options %+v", o)
	}
	for body, want := range map[string]string{
		`{"temperature":"0.5"}`: `option "temperature" must be of type float32`,
		`{"num_predict":true}`:  `option "num_predict" must be of type integer`,
		`{"seed":1e300}`:        `option "seed" is out of range`,
		`{"stop":"x"}`:          `option "stop" must be of type array`,
		`{"stop":[1]}`:          `option "stop" must be of an array of strings`,
		`{"use_mmap":"yes"}`:    `option "use_mmap" must be of type boolean`,
		`{"typical_p":[]}`:      `option "typical_p" must be of type float32`,
		`{"num_keep":{"a":1}}`:  `option "num_keep" must be of type integer`,
		`{"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`: "at most 16",
	} {
		_, err := parseOptions(rawOptions(t, body))
		if ae := wire.AsError(err); err == nil || ae.Status != 400 || !strings.Contains(ae.Msg, want) {
			t.Errorf("%s: %v, want a 400 saying %q", body, err, want)
		}
	}
}

// Absent sampling options take Ollama's temperature and the model's
// truncation defaults; set ones are range checked; seed -1 is random and
// repeat_last_n maps onto the engine's.
func TestOllamaSampling(t *testing.T) {
	m := tasktest.ChatMLModel(t, 4096)
	var o options
	s, err := o.sampling(m)
	if err != nil {
		t.Fatal(err)
	}
	if s.Temperature != 0.8 || s.TopK != 40 || math.Abs(float64(s.TopP)-0.95) > 1e-6 || math.Abs(float64(s.MinP)-0.05) > 1e-6 || s.RepeatPenalty != 1 {
		t.Errorf("defaults %+v", s)
	}
	o, _ = parseOptions(rawOptions(t, `{"temperature":0,"seed":7,"repeat_penalty":1.2,"repeat_last_n":100000}`))
	if s, err = o.sampling(m); err != nil || s.Temperature != 0 || s.Seed != 7 || s.RepeatPenalty != 1.2 || s.PenaltyLastN != 4096 {
		t.Errorf("set: %+v, %v", s, err)
	}
	for _, body := range []string{`{"temperature":-1}`, `{"top_p":0}`, `{"top_p":1.5}`, `{"min_p":2}`, `{"top_k":-1}`, `{"repeat_last_n":-2}`, `{"repeat_penalty":0}`} {
		o, _ := parseOptions(rawOptions(t, body))
		if _, err := o.sampling(m); err == nil {
			t.Errorf("%s accepted", body)
		}
	}
}

// num_ctx narrows the window (never widens it) and bounds generation to
// the room the prompt leaves; num_predict ≤ 0 is unbounded.
func TestOllamaWindowAndLimit(t *testing.T) {
	m := tasktest.ChatMLModel(t, 1000)
	cases := []struct {
		opts             string
		window, prompt   int
		wantMax, wantCtx int
	}{
		{`{}`, 1000, 10, 0, 1000},
		{`{"num_predict":-1}`, 1000, 10, 0, 1000},
		{`{"num_predict":50}`, 1000, 10, 50, 1000},
		{`{"num_predict":5000}`, 1000, 10, 1000, 1000},
		{`{"num_ctx":4096}`, 1000, 10, 0, 1000},
		{`{"num_ctx":100}`, 100, 10, 90, 100},
		{`{"num_ctx":100,"num_predict":20}`, 100, 10, 20, 100},
		{`{"num_ctx":100,"num_predict":200}`, 100, 10, 90, 100},
	}
	for _, tc := range cases {
		o, err := parseOptions(rawOptions(t, tc.opts))
		if err != nil {
			t.Fatal(err)
		}
		w := o.window(m)
		if got := o.maxTokens(m, w, tc.prompt); got != tc.wantMax || w.Desc.Ctx != tc.wantCtx || m.Desc.Ctx != 1000 {
			t.Errorf("%s: limit %d window %d, want %d and %d", tc.opts, got, w.Desc.Ctx, tc.wantMax, tc.wantCtx)
		}
	}
}

// A conversation ending with an assistant message is continued, not
// closed; any other renders with the generation prompt.
func TestRenderContinuation(t *testing.T) {
	m := tasktest.ChatMLModel(t, 512)
	render := func(msgs ...chat.Message) string {
		text, err := task.RenderTurn(m, chat.Request{Messages: msgs, AddGenerationPrompt: true}, true)
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	user := chat.Message{Role: chat.RoleUser, Content: "hi"}
	if got := render(user); got != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("plain: %q", got)
	}
	if got := render(user, chat.Message{Role: chat.RoleAssistant, Content: "Sure,"}); got != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nSure," {
		t.Errorf("prefill: %q", got)
	}
}

// /api/generate renders as the routes promise: templated as a user turn
// (after the system prompt), raw as is, with a suffix in the FIM format
// and class; the context of a previous answer goes first, as tokens.
func TestOllamaGeneratePrompts(t *testing.T) {
	m := tasktest.ChatMLModel(t, 512)
	a := testAPI()
	plan := func(body string) *job {
		t.Helper()
		ctx := tasktest.RequestCtx([]byte(body))
		var req generateRequest
		if err := wire.DecodeJSON(ctx, &req); err != nil {
			t.Fatal(err)
		}
		j, err := a.generateJob(ctx, m, &req)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return j
	}
	text := func(j *job) string { return m.Text.Detokenize(j.req.Prompt, true) }
	j := plan(`{"model":"tiny","prompt":"hi","system":"s"}`)
	if text(j) != "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" || !j.context || !j.stream || j.req.Class != sched.Chat {
		t.Errorf("templated: %q %+v", text(j), j)
	}
	if j = plan(`{"model":"tiny","prompt":"<|im_start|>x","raw":true,"stream":false}`); text(j) != "<|im_start|>x" || j.context || j.stream {
		t.Errorf("raw: %q %+v", text(j), j)
	}
	j = plan(`{"model":"tiny","prompt":"a","suffix":"b","raw":true}`)
	if text(j) != "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>" || j.req.Class != sched.FIM || len(j.req.StopTokens) == 0 || j.context {
		t.Errorf("FIM: %q %+v", text(j), j.req)
	}
	j = plan(`{"model":"tiny","prompt":"hi","context":[104,105]}`)
	if text(j) != "hi<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("with context: %q", text(j))
	}
	if j = plan(`{"model":"tiny","keep_alive":"0s"}`); j.req != nil || j.loadReason != "unload" {
		t.Errorf("unload: %+v", j)
	}
	ctx := tasktest.RequestCtx(nil)
	ctx.Request.Header.Set("X-Superfluid-Class", "background")
	if j, err := a.generateJob(ctx, m, &generateRequest{Model: "tiny", Prompt: "p"}); err != nil || j.req.Class != sched.Background {
		t.Errorf("class header: %v %+v", err, j)
	}
	if j, err := a.generateJob(ctx, m, &generateRequest{Model: "tiny", Prompt: "p", Suffix: "s"}); err != nil || j.req.Class != sched.FIM {
		t.Errorf("FIM ignores the class header: %v %+v", err, j)
	}
}

func TestOllamaNamesAndNumbers(t *testing.T) {
	for name, want := range map[string]string{"tiny": "tiny:latest", "tiny:q8": "tiny:q8", "host:1/lib/m": "host:1/lib/m:latest"} {
		if got := taggedName(name); got != want {
			t.Errorf("taggedName(%q) = %q, want %q", name, got, want)
		}
	}
	for n, want := range map[uint64]string{999: "999", 139584: "140K", 494032768: "494.03M", 8000000000: "8B", 7615616512: "7.6B"} {
		if got := humanNumber(n); got != want {
			t.Errorf("humanNumber(%d) = %q, want %q", n, got, want)
		}
	}
	for version, want := range map[string]string{"": "0.0.0", "dev": "0.0.0-dev", "v1.2.3": "1.2.3", "0.4.0-rc1": "0.4.0-rc1"} {
		a := &api{host: testHost(wire.Settings{Version: version}, nil)}
		ctx := tasktest.RequestCtx(nil)
		a.version(ctx, nil)
		if got := string(ctx.Response.Body()); got != `{"version":"`+want+`"}` {
			t.Errorf("version %q answers %s", version, got)
		}
	}
}

// GGUF metadata becomes JSON the way Ollama shows it: byte arrays as numbers, float32
// kept short, non-finite values dropped.
func TestModelInfoValues(t *testing.T) {
	if v, ok := jsonValue(gguf.Array{Elem: gguf.TypeUint8, Values: []uint8{1, 2}}); !ok || len(v.([]int)) != 2 {
		t.Errorf("uint8 array: %v", v)
	}
	if b, _ := json.Marshal(must(jsonValue(float32(1e-6)))); string(b) != "0.000001" {
		t.Errorf("float32: %s", b)
	}
	if _, ok := jsonValue(float32(math.NaN())); ok {
		t.Error("NaN kept")
	}
	if _, ok := jsonValue(gguf.Array{Elem: gguf.TypeArray, Values: []gguf.Array{{Elem: gguf.TypeFloat64, Values: []float64{math.Inf(1)}}}}); ok {
		t.Error("nested Inf kept")
	}
	m := tasktest.ChatMLModel(t, 333)
	info := modelInfo(m, nil, false)
	if info["llama.context_length"] != 333 || info["general.architecture"] != "llama" {
		t.Errorf("model_info %v", info)
	}
}

func must(v any, _ bool) any { return v }

// A model that cannot fill in the middle says so the way Ollama does: a
// 400 for a suffix, and /api/show without .Suffix or "insert", which is
// what tells Continue not to send FIM requests.
func TestOllamaWithoutFIM(t *testing.T) {
	m := tasktest.ChatMLModel(t, 512)
	m.FIM = nil
	a := testAPI()
	_, err := a.generateJob(tasktest.RequestCtx(nil), m, &generateRequest{Model: "tiny", Prompt: "a", Suffix: "b"})
	var ae *wire.Error
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Msg != `"tiny" does not support insert` {
		t.Errorf("suffix: %v", err)
	}
	ctx := tasktest.RequestCtx([]byte(`{"model":"tiny"}`))
	if err := a.show(ctx, m); err != nil {
		t.Fatal(err)
	}
	var show showResponse
	if err := json.Unmarshal(ctx.Response.Body(), &show); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(show.Template, ".Suffix") || len(show.Capabilities) != 1 || show.Capabilities[0] != "completion" {
		t.Errorf("show: template %q, capabilities %v", show.Template, show.Capabilities)
	}
}
