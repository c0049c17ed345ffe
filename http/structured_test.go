package http

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/grammar"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// Structured output through the real handlers of every API: each field
// reaches the scheduler as the grammar the converter makes of it, and each
// bad schema, unsupported keyword or unparsable grammar is a 400 in the
// API's own shape naming the field. The scheduler is the recording stub.

const personSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"]}`

// wantSchema checks that the request carries exactly the grammar of
// schema converted with strict, constrained from the first token.
func wantSchema(schema string, strict bool) func(sched.Request) string {
	return func(r sched.Request) string {
		want, err := grammar.FromJSONSchema([]byte(schema), grammar.Options{Strict: strict})
		if err != nil {
			return fmt.Sprintf("converting the test's schema: %v", err)
		}
		return wantGrammar(want)(r)
	}
}

func wantGrammar(gbnf string) func(sched.Request) string {
	return func(r sched.Request) string {
		switch g := r.Grammar; {
		case g == nil:
			return "no grammar reached the scheduler"
		case g.GBNF != gbnf:
			return fmt.Sprintf("grammar\n%s\nwant\n%s", g.GBNF, gbnf)
		case g.Lazy || g.Root != "" || len(g.TriggerPatterns)+len(g.TriggerTokens) > 0:
			return fmt.Sprintf("grammar lazy %v root %q triggers %q %v, want a plain one", g.Lazy, g.Root, g.TriggerPatterns, g.TriggerTokens)
		}
		return ""
	}
}

func noGrammar(r sched.Request) string {
	if r.Grammar != nil {
		return fmt.Sprintf("grammar %+v, want none", *r.Grammar)
	}
	return ""
}

func TestStructuredOutputReachesTheScheduler(t *testing.T) {
	anyObject := `{"type":"object"}`
	rfSchema := func(strict string) string {
		return `,"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":` + personSchema + strict + `}}`
	}
	gbnf := `root ::= "yes" | "no"`
	gbnfJSON, _ := json.Marshal(gbnf)
	var cases []poisonCase
	// OpenAI's response_format, on chat and completions alike.
	for _, ep := range []struct {
		path string
		body func(string) string
	}{{"/v1/chat/completions", oaiChatBody}, {"/v1/completions", oaiCmplBody}} {
		cases = append(cases,
			poisonCase{ep.path, ep.body(rfSchema(`,"strict":true`)), "", wantSchema(personSchema, true)},
			poisonCase{ep.path, ep.body(rfSchema(``)), "", wantSchema(personSchema, false)},
			poisonCase{ep.path, ep.body(rfSchema(`,"strict":false`)), "", wantSchema(personSchema, false)},
			poisonCase{ep.path, ep.body(`,"response_format":{"type":"json_object"}`), "", wantSchema(anyObject, false)},
			// llama.cpp's json_object with a schema.
			poisonCase{ep.path, ep.body(`,"response_format":{"type":"json_object","schema":` + personSchema + `}`), "", wantSchema(personSchema, true)},
			poisonCase{ep.path, ep.body(`,"response_format":{"type":"text"}`), "", noGrammar},
			poisonCase{ep.path, ep.body(`,"response_format":null`), "", noGrammar},
		)
	}
	// llama.cpp's json_schema and grammar on all four of its routes.
	for _, ep := range []struct {
		path string
		body func(string) string
	}{{"/completion", llamaBody}, {"/infill", infillBody}, {"/v1/completions", oaiCmplBody}, {"/v1/chat/completions", oaiChatBody}} {
		cases = append(cases,
			poisonCase{ep.path, ep.body(`,"json_schema":` + personSchema), "", wantSchema(personSchema, true)},
			poisonCase{ep.path, ep.body(`,"json_schema":{}`), "", wantSchema(`{}`, true)},
			poisonCase{ep.path, ep.body(`,"grammar":` + string(gbnfJSON)), "", wantGrammar(gbnf)},
			poisonCase{ep.path, ep.body(`,"grammar":"","json_schema":null,"grammar_lazy":false,"grammar_triggers":[]`), "", noGrammar},
		)
	}
	cases = append(cases,
		// The warm-up (n_predict 0) generates nothing to constrain.
		poisonCase{"/completion", llamaBody(`,"n_predict":0,"json_schema":` + personSchema), "", noGrammar},
		// Ollama's format.
		poisonCase{"/api/generate", ollamaGenBody(`,"format":"json"`), "", wantSchema(anyObject, false)},
		poisonCase{"/api/generate", ollamaGenBody(`,"format":` + personSchema), "", wantSchema(personSchema, true)},
		poisonCase{"/api/generate", ollamaGenBody(`,"raw":true,"format":` + personSchema), "", wantSchema(personSchema, true)},
		poisonCase{"/api/generate", ollamaGenBody(`,"format":""`), "", noGrammar},
		poisonCase{"/api/chat", ollamaChatBody(`,"format":"json"`), "", wantSchema(anyObject, false)},
		poisonCase{"/api/chat", ollamaChatBody(`,"format":` + personSchema), "", wantSchema(personSchema, true)},
		// Anthropic's output_config.format and the beta's output_format.
		poisonCase{"/v1/messages", anthropicBody(`,"output_config":{"format":{"type":"json_schema","schema":` + personSchema + `}}`), "", wantSchema(personSchema, true)},
		poisonCase{"/v1/messages", anthropicBody(`,"output_config":{"effort":"low"}`), "", noGrammar},
		poisonCase{"/v1/messages", anthropicBody(`,"output_format":{"type":"json_schema","schema":` + personSchema + `}`), "", wantSchema(personSchema, true)},
	)
	runPoisonCases(t, cases)
}

// A lazy grammar from llama.cpp's grammar_lazy and grammar_triggers: a
// token trigger by id, a word as an escaped pattern, a pattern as is.
func TestLazyGrammarTriggers(t *testing.T) {
	lazy := func(r sched.Request) string {
		g := r.Grammar
		if g == nil || !g.Lazy || g.GBNF != `root ::= "{" [a-z]* "}"` {
			return fmt.Sprintf("grammar %+v, want the lazy grammar sent", g)
		}
		if fmt.Sprint(g.TriggerTokens) != "[65]" || fmt.Sprintf("%q", g.TriggerPatterns) != `["a\\.b\\*" "<x>[0-9]+"]` {
			return fmt.Sprintf("triggers %v %q", g.TriggerTokens, g.TriggerPatterns)
		}
		return ""
	}
	body := `,"grammar":"root ::= \"{\" [a-z]* \"}\"","grammar_lazy":true,"grammar_triggers":[{"type":0,"token":65,"value":"A"},{"type":1,"value":"a.b*"},{"type":2,"value":"<x>[0-9]+"}]`
	runPoisonCases(t, []poisonCase{
		{"/completion", llamaBody(body), "", lazy},
		{"/v1/chat/completions", oaiChatBody(body), "", lazy},
		{"/completion", llamaBody(`,"json_schema":{"type":"boolean"},"grammar_lazy":true,"grammar_triggers":[{"type":0,"token":65}]`), "", func(r sched.Request) string {
			if r.Grammar == nil || !r.Grammar.Lazy || !strings.Contains(r.Grammar.GBNF, `"true"`) {
				return fmt.Sprintf("grammar %+v, want the schema's, lazily", r.Grammar)
			}
			return ""
		}},
		{"/completion", llamaBody(`,"grammar":"root ::= \"a\"","grammar_triggers":[{"type":1,"value":"x"}]`), "grammar_triggers", nil},
		{"/completion", llamaBody(`,"grammar":"root ::= \"a\"","grammar_lazy":true`), "grammar_triggers", nil},
		{"/completion", llamaBody(`,"grammar_lazy":true,"grammar_triggers":[{"type":1,"value":"x"}]`), "grammar_lazy", nil},
		{"/completion", llamaBody(`,"grammar":"root ::= \"a\"","grammar_lazy":"yes","grammar_triggers":[{"type":1,"value":"x"}]`), "grammar_lazy", nil},
		{"/completion", llamaBody(`,"grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":3,"value":"^x$"}]`), "grammar_triggers", nil},
		{"/completion", llamaBody(`,"grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":0,"token":99999}]`), "grammar_triggers", nil},
		{"/completion", llamaBody(`,"grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":1,"value":""}]`), "grammar_triggers", nil},
		{"/completion", llamaBody(`,"grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"value":"x"}]`), "grammar_triggers", nil},
		{"/completion", llamaBody(`,"grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":{"type":1}`), "grammar_triggers", nil},
	})
}

// Bad schemas, unsupported keywords and unparsable grammars: a 400 in each
// API's shape naming the field, before anything is scheduled.
func TestStructuredOutputRefusals(t *testing.T) {
	unsupported := `{"type":"object","properties":{"tags":{"type":"array","contains":{"type":"string"}}}}`
	invalid := `{"type":"object","properties":{"n":{"type":5}}}`
	rf := func(schema string) string {
		return `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}`
	}
	var cases []poisonCase
	for _, ep := range []struct {
		path string
		body func(string) string
	}{{"/v1/chat/completions", oaiChatBody}, {"/v1/completions", oaiCmplBody}} {
		cases = append(cases,
			poisonCase{ep.path, ep.body(rf(unsupported)), "response_format.json_schema.schema", nil},
			poisonCase{ep.path, ep.body(rf(invalid)), "response_format.json_schema.schema", nil},
			poisonCase{ep.path, ep.body(rf(`false`)), "response_format.json_schema.schema", nil},
			poisonCase{ep.path, ep.body(rf(`"object"`)), "response_format.json_schema.schema", nil},
			poisonCase{ep.path, ep.body(`,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`), "response_format.json_schema.schema", nil},
			poisonCase{ep.path, ep.body(`,"response_format":{"type":"json_schema"}`), "response_format.json_schema", nil},
			poisonCase{ep.path, ep.body(`,"response_format":{"type":"yaml"}`), "response_format.type", nil},
			poisonCase{ep.path, ep.body(`,"response_format":{}`), "response_format.type", nil},
			poisonCase{ep.path, ep.body(`,"response_format":"json"`), "response_format", nil},
			poisonCase{ep.path, ep.body(`,"response_format":{"type":"json_object"},"grammar":"root ::= \"a\""`), "grammar", nil},
			poisonCase{ep.path, ep.body(`,"json_schema":{},"grammar":"root ::= \"a\""`), "grammar", nil},
		)
	}
	for _, ep := range []struct {
		path string
		body func(string) string
	}{{"/completion", llamaBody}, {"/infill", infillBody}, {"/v1/completions", oaiCmplBody}, {"/v1/chat/completions", oaiChatBody}} {
		cases = append(cases,
			poisonCase{ep.path, ep.body(`,"json_schema":` + unsupported), "json_schema", nil},
			poisonCase{ep.path, ep.body(`,"json_schema":` + invalid), "json_schema", nil},
			poisonCase{ep.path, ep.body(`,"json_schema":[1]`), "json_schema", nil},
			poisonCase{ep.path, ep.body(`,"grammar":"root ::= (\"a\""`), "grammar", nil},
			poisonCase{ep.path, ep.body(`,"grammar":"root ::= undefined-rule"`), "grammar", nil},
			poisonCase{ep.path, ep.body(`,"grammar":"start ::= \"a\""`), "grammar", nil},
			poisonCase{ep.path, ep.body(`,"grammar":7`), "grammar", nil},
		)
	}
	cases = append(cases,
		poisonCase{"/api/generate", ollamaGenBody(`,"format":"xml"`), "format", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"format":5`), "format", nil},
		poisonCase{"/api/generate", ollamaGenBody(`,"format":` + unsupported), "format", nil},
		poisonCase{"/api/chat", ollamaChatBody(`,"format":` + invalid), "format", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"output_config":{"format":{"type":"json_schema","schema":` + unsupported + `}}`), "output_config.format.schema", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"output_config":{"format":{"type":"json_schema"}}`), "output_config.format.schema", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"output_config":{"format":{"type":"text"}}`), "output_config.format", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"output_format":{"type":"json_schema","schema":` + invalid + `}`), "output_format.schema", nil},
		poisonCase{"/v1/messages", anthropicBody(`,"output_format":{"type":"json_schema","schema":{}},"output_config":{"format":{"type":"json_schema","schema":{}}}`), "output_format", nil},
		poisonCase{"/v1/messages/count_tokens", anthropicBody(`,"output_format":{"type":"json_schema","schema":` + unsupported + `}`), "output_format.schema", nil},
	)
	runPoisonCases(t, cases)

	// The keyword and where it sits are named, on every API.
	_, _, _, do := poisonServer(t, engine.ModelSampling{})
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", oaiChatBody(rf(unsupported))},
		{"/completion", llamaBody(`,"json_schema":` + unsupported)},
		{"/api/chat", ollamaChatBody(`,"format":` + unsupported)},
		{"/v1/messages", anthropicBody(`,"output_config":{"format":{"type":"json_schema","schema":` + unsupported + `}}`)},
	} {
		status, b := do("POST", c.path, c.body)
		msg := errorShapeOf(t, kindOfPath(c.path), status, b)
		if !strings.Contains(msg, `"contains"`) || !strings.Contains(msg, "#/properties/tags") {
			t.Errorf("%s: %q should name the keyword \"contains\" and its path #/properties/tags", c.path, msg)
		}
	}
	status, b := do("POST", "/completion", llamaBody(`,"grammar":"root ::= (\"a\""`))
	if msg := errorShapeOf(t, wire.Llama, status, b); !strings.Contains(msg, "line 1, column") {
		t.Errorf("an unparsable grammar's refusal %q should say where it broke", msg)
	}
}

// grammarRefusingSched refuses every request as the engine refuses a
// grammar it cannot parse.
type grammarRefusingSched struct{ tasktest.StubSched }

func (s *grammarRefusingSched) Submit(ctx context.Context, req sched.Request) (*sched.Stream, error) {
	s.StubSched.Submit(ctx, req)
	if req.Grammar == nil {
		return nil, tasktest.ErrStubRefused
	}
	return nil, fmt.Errorf("sched: compiling the grammar: %w", &engine.Error{Op: "grammar", Status: engine.StatusGrammar, Msg: "failed to parse grammar"})
}

// The engine's refusal of a grammar (engine.ErrGrammar from Submit) is a
// 400 naming the field, in each API's shape — streamed requests too, since
// handlers submit before they answer.
func TestEngineGrammarRefusalIs400(t *testing.T) {
	served, _, _, _ := poisonServer(t, engine.ModelSampling{})
	// A copy: the poison server serves the model it returned (its status
	// sampler reads it), so this test's server gets its own.
	mm := *served
	m := &mm
	gs := &grammarRefusingSched{}
	m.Sched = gs
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetModel(m)
	c := memServer(t, s)
	schema := `{"type":"string","maxLength":3}`
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/chat/completions", oaiChatBody(`,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":` + schema + `}}`), "response_format.json_schema.schema"},
		{"/v1/chat/completions", oaiChatBody(`,"stream":true,"response_format":{"type":"json_object"}`), "response_format"},
		{"/v1/completions", oaiCmplBody(`,"n":2,"grammar":"root ::= \"a\""`), "grammar"},
		{"/completion", llamaBody(`,"json_schema":` + schema), "json_schema"},
		{"/completion", llamaBody(`,"stream":true,"grammar":"root ::= \"a\""`), "grammar"},
		{"/infill", infillBody(`,"grammar":"root ::= \"a\""`), "grammar"},
		{"/api/generate", ollamaGenBody(`,"format":"json"`), "format"},
		{"/api/chat", ollamaChatBody(`,"stream":true,"format":` + schema), "format"},
		{"/v1/messages", anthropicBody(`,"output_format":{"type":"json_schema","schema":` + schema + `}`), "output_format.schema"},
		{"/v1/messages", anthropicBody(`,"stream":true,"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}`), "output_config.format.schema"},
	} {
		status, _, b := call(t, c, "POST", tc.path, tc.body)
		if len(gs.Taken()) == 0 {
			t.Errorf("%s %s: never reached the scheduler", tc.path, tc.body)
			continue
		}
		if status != 400 {
			t.Errorf("%s %s: status %d %s, want 400", tc.path, tc.body, status, b)
			continue
		}
		kind := kindOfPath(tc.path)
		msg := errorShapeOf(t, kind, status, b)
		if !strings.Contains(msg, tc.field) || !strings.Contains(msg, "failed to parse grammar") {
			t.Errorf("%s: %q should name %s and the engine's reason", tc.path, msg, tc.field)
		}
		if kind == wire.OpenAI {
			var e struct {
				Error struct {
					Param string `json:"param"`
					Code  string `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal(b, &e) != nil || e.Error.Param != tc.field || e.Error.Code != "invalid_grammar" {
				t.Errorf("%s: %s, want param %q and code invalid_grammar", tc.path, b, tc.field)
			}
		}
	}
}

// thinkText is the fake vocabulary plus a reasoning block's end marker as
// one special token.
type thinkText struct{ tasktest.FakeText }

const fakeThinkEnd = engine.Token(tasktest.FakeVocab)

func (x thinkText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	var out []engine.Token
	for {
		i := strings.Index(text, task.ThinkEnd)
		if !parseSpecial || i < 0 {
			rest, err := x.FakeText.Tokenize(text, addSpecial && len(out) == 0, parseSpecial)
			return append(out, rest...), err
		}
		head, _ := x.FakeText.Tokenize(text[:i], addSpecial && len(out) == 0, parseSpecial)
		out = append(append(out, head...), fakeThinkEnd)
		text = text[i+len(task.ThinkEnd):]
		addSpecial = false
	}
}

func (x thinkText) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	if tok == fakeThinkEnd {
		return append(dst, task.ThinkEnd...)
	}
	return x.FakeText.AppendPiece(dst, tok, special)
}

func (x thinkText) Detokenize(tokens []engine.Token, special bool) string {
	var b []byte
	for _, t := range tokens {
		b = x.AppendPiece(b, t, special)
	}
	return string(b)
}

// Templates with a reasoning block: Qwen3's shape (the model opens the
// block itself), and one that renders thinking disabled as an empty block.
const (
	thinkingTemplate = chat.ChatML + `{#- the reasoning block ends with </think> -#}`
	closedTemplate   = `{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n<think>\n\n</think>\n\n' }}{% endif %}`
)

// reasoningServer serves the fake model with template src and the
// </think> token.
func reasoningServer(t *testing.T, src string, markerToken bool) func(path, body string) sched.Request {
	t.Helper()
	served, _, _, _ := poisonServer(t, engine.ModelSampling{})
	mm := *served // the poison server serves the model it returned: this server gets a copy
	m := &mm
	tmpl, err := chat.Parse(src, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sc := &tasktest.StubSched{}
	d := *m.Desc
	d.ChatTemplate = src
	if markerToken {
		d.Vocab++
		m.Text = thinkText{}
	}
	m.Desc, m.Chat, m.Sched = &d, tmpl, sc
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetModel(m)
	c := memServer(t, s)
	return func(path, body string) sched.Request {
		t.Helper()
		status, _, b := call(t, c, "POST", path, body)
		taken := sc.Taken()
		if len(taken) != 1 {
			t.Fatalf("%s %s: %d %s, nothing scheduled", path, body, status, b)
		}
		return taken[0]
	}
}

// answerGrammar parses a reasoning spec's grammar from its own root rule
// (the recognizer starts at "root"): the rules renamed, root to
// schema-root and spec.Root to root.
func answerGrammar(t *testing.T, g *engine.GrammarSpec) *grammar.Grammar {
	t.Helper()
	rename := func(text, from, to string) string {
		re := regexp.MustCompile(`(^|[^a-zA-Z0-9-])` + regexp.QuoteMeta(from) + `([^a-zA-Z0-9-]|$)`)
		for {
			next := re.ReplaceAllString(text, "${1}"+to+"${2}")
			if next == text {
				return text
			}
			text = next
		}
	}
	text := rename(rename(g.GBNF, "root", "schema-root-renamed"), g.Root, "root")
	gr, err := grammar.ParseGBNF(text)
	if err != nil {
		t.Fatalf("the answer grammar does not parse: %v\n%s", err, text)
	}
	return gr
}

// For a template with a reasoning block the schema's grammar is lazy,
// triggered by the block's end (the token when the vocabulary has one, else
// the text), and admits the marker and the whitespace after it before the
// answer; a prompt that closed the block, a raw prompt and a client's own
// GBNF are constrained from the first token.
func TestStructuredOutputAfterReasoning(t *testing.T) {
	schema := `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`
	rf := `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}`
	do := reasoningServer(t, thinkingTemplate, true)
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", oaiChatBody(rf)},
		{"/v1/chat/completions", oaiChatBody(`,"json_schema":` + schema)},
		{"/api/chat", ollamaChatBody(`,"format":` + schema)},
		{"/api/generate", ollamaGenBody(`,"format":` + schema)},
		{"/v1/messages", anthropicBody(`,"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}`)},
	} {
		g := do(c.path, c.body).Grammar
		if g == nil || !g.Lazy || g.Root == "" || fmt.Sprint(g.TriggerTokens) != fmt.Sprint([]engine.Token{fakeThinkEnd}) || len(g.TriggerPatterns) != 0 {
			t.Errorf("%s: grammar %+v, want lazy on the </think> token", c.path, g)
			continue
		}
		gr := answerGrammar(t, g)
		for text, want := range map[string]bool{
			`</think>{"ok":true}`: true, "</think>\n\n{\"ok\":false}": true, `{"ok":true}`: true,
			`</think>{"ok":1}`: false, `</think></think>{"ok":true}`: false, `x{"ok":true}`: false,
		} {
			if gr.Accepts(text) != want {
				t.Errorf("%s: the answer grammar accepts %q: %v, want %v", c.path, text, !want, want)
			}
		}
	}
	// Raw prompts and client grammars are the client's: not lazy.
	for _, c := range []struct{ path, body string }{
		{"/api/generate", ollamaGenBody(`,"raw":true,"format":` + schema)},
		{"/v1/completions", oaiCmplBody(rf)},
		{"/completion", llamaBody(`,"json_schema":` + schema)},
		{"/v1/chat/completions", oaiChatBody(`,"grammar":"root ::= \"a\""`)},
	} {
		if g := do(c.path, c.body).Grammar; g == nil || g.Lazy || g.Root != "" {
			t.Errorf("%s %s: grammar %+v, want constrained from the first token", c.path, c.body, g)
		}
	}
	// Without a token for the marker the trigger is its text.
	do = reasoningServer(t, thinkingTemplate, false)
	if g := do("/v1/chat/completions", oaiChatBody(rf)).Grammar; g == nil || !g.Lazy || fmt.Sprintf("%q", g.TriggerPatterns) != `["<\\/think>"]` || len(g.TriggerTokens) != 0 {
		t.Errorf("grammar %+v, want lazy on the pattern <\\/think>", g)
	}
	// A prompt that closed the block: nothing to wait for.
	do = reasoningServer(t, closedTemplate, true)
	if g := do("/v1/chat/completions", oaiChatBody(rf)).Grammar; g == nil || g.Lazy || g.Root != "" {
		t.Errorf("grammar %+v after a closed reasoning block, want it constrained at once", g)
	}
}

// A schema property named like the wrapper's rule does not clash with it.
func TestReasoningRootNameIsUnused(t *testing.T) {
	schema := `{"type":"object","properties":{"answer-after-reasoning":{"type":"boolean"}},"required":["answer-after-reasoning"],"additionalProperties":false}`
	do := reasoningServer(t, thinkingTemplate, true)
	g := do("/api/chat", ollamaChatBody(`,"format":`+schema)).Grammar
	if g == nil || g.Root == "answer-after-reasoning" {
		t.Fatalf("grammar %+v: the root rule should avoid the name the schema took", g)
	}
	if !answerGrammar(t, g).Accepts(`</think>{"answer-after-reasoning":true}`) {
		t.Errorf("the answer grammar refuses a valid answer:\n%s", g.GBNF)
	}
}

func TestGrammarFinishIsStop(t *testing.T) {
	if got := task.FinishName(sched.FinishGrammar); got != "stop" {
		t.Fatalf("finishName(FinishGrammar) = %q, want stop", got)
	}
}
