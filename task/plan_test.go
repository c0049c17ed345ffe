package task

import (
	"strings"
	"testing"

	"superfluid/chat"

	"superfluid/engine"
	"superfluid/reply"
	"superfluid/sched"
)

// A request of n choices is n copies of its Spec, choice i sampling with
// the seed plus i, so that the choices differ.
func TestPlanExpandsChoicesWithTheirSeeds(t *testing.T) {
	req := &Request{Spec: Spec{Prompt: []engine.Token{1, 2}, MaxTokens: 7, Sampling: engine.Sampling{Seed: 40}}, N: 3}
	choices, err := Plan(&Model{}, req)
	if err != nil || len(choices) != 3 {
		t.Fatalf("%d choices (%v), want 3", len(choices), err)
	}
	for i, c := range choices {
		if c.Sampling.Seed != 40+uint64(i) || c.MaxTokens != 7 || len(c.Prompt) != 2 {
			t.Errorf("choice %d: %+v", i, c)
		}
	}
	if again, _ := Plan(&Model{}, req); &again[0] != &choices[0] || again[0] != choices[0] {
		t.Error("a second Plan made the choices again")
	}
	if one, _ := Plan(&Model{}, &Request{}); len(one) != 1 {
		t.Errorf("N 0 made %d choices, want 1", len(one))
	}
}

// Choices an API set itself (one per prompt of a list) are kept as they are.
func TestPlanKeepsTheAPIsChoices(t *testing.T) {
	a, b := &Spec{MaxTokens: 1}, &Spec{MaxTokens: 2}
	got, _ := Plan(&Model{}, &Request{Spec: Spec{MaxTokens: 9}, N: 5, Choices: []*Spec{a, b}, Chat: &Chat{}})
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("choices %v", got)
	}
}

// A chat plan sets the prompt, the grammar with its field, and how the
// reply is read, so that Run follows the choice as a turn.
func TestChatPlanApply(t *testing.T) {
	p := &ChatPlan{Prompt: []engine.Token{5}, Grammar: &engine.GrammarSpec{GBNF: "root ::= \"x\""}, GrammarField: "tools",
		Reply: ReplyPlan{Options: reply.Options{Lead: "<tool_call>"}}, Show: []engine.Token{9}}
	var s Spec
	p.Apply(&s)
	if len(s.Prompt) != 1 || s.Grammar != p.Grammar || s.GrammarField != "tools" || s.Reply == nil || s.Reply.Options.Lead != "<tool_call>" || len(s.Show) != 1 {
		t.Fatalf("spec %+v", s)
	}
}

// A turn with tools runs as an agent's unless the client named a class.
func TestChatClass(t *testing.T) {
	tools, err := NewTools("tools", []reply.Tool{{Name: "get_weather"}})
	if err != nil {
		t.Fatal(err)
	}
	fallback := func() (sched.Class, error) { return sched.Background, nil }
	for _, c := range []struct {
		chat *Chat
		sent bool
		want sched.Class
	}{
		{&Chat{Tools: tools}, false, sched.Agent},
		{&Chat{Tools: tools}, true, sched.Background},
		{&Chat{}, false, sched.Background},
		{&Chat{Tools: Tools{List: tools.List, None: true}}, false, sched.Background},
	} {
		if got, _ := ChatClass(c.chat, c.sent, fallback); got != c.want {
			t.Errorf("tools %v (none %v), header sent %v: class %v, want %v", len(c.chat.Tools.List), c.chat.Tools.None, c.sent, got, c.want)
		}
	}
}

// Tool names and choices are checked with the field named.
func TestToolsChecks(t *testing.T) {
	if _, err := NewTools("tools", []reply.Tool{{Name: "a b"}}); err == nil {
		t.Error("a name with a space was accepted")
	}
	if _, err := NewTools("tools", []reply.Tool{{Name: "f"}, {Name: "f"}}); err == nil {
		t.Error("a name declared twice was accepted")
	}
	tools, _ := NewTools("tools", []reply.Tool{{Name: "f"}})
	if err := tools.Require("tool_choice", "named", "g", false); err == nil {
		t.Error("a choice of an undeclared tool was accepted")
	} else if e, ok := AsError(err); !ok || e.Param != "tool_choice" {
		t.Errorf("error %v does not name tool_choice", err)
	}
	var none Tools
	if err := none.Require("tool_choice", "required", "", false); err == nil {
		t.Error("a required call without tools was accepted")
	}
}

// byteText is a vocabulary of one token per byte.
type byteText struct{}

func (byteText) Tokenize(text string, _, _ bool) ([]engine.Token, error) {
	toks := make([]engine.Token, len(text))
	for i := range len(text) {
		toks[i] = engine.Token(text[i])
	}
	return toks, nil
}
func (byteText) AppendPiece(dst []byte, tok engine.Token, _ bool) []byte {
	return append(dst, byte(tok))
}
func (byteText) Detokenize(toks []engine.Token, _ bool) string {
	b := make([]byte, len(toks))
	for i, t := range toks {
		b[i] = byte(t)
	}
	return string(b)
}

// A request with a chat turn is rendered through the model's template by
// Plan, and every choice carries the prompt and the reply reading.
func TestPlanRendersTheChat(t *testing.T) {
	tmpl, err := chat.Parse(`{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Desc: &engine.Descriptor{Ctx: 256, Vocab: 256}, Text: byteText{}, Chat: tmpl}
	req := &Request{Chat: &Chat{Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}, N: 2}
	choices, err := Plan(m, req)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range choices {
		if got := (byteText{}).Detokenize(c.Prompt, false); got != "<user>hi<assistant>" || c.Reply == nil {
			t.Errorf("choice %d: prompt %q, reply plan %v", i, got, c.Reply)
		}
	}
	_, err = Plan(&Model{Desc: &engine.Descriptor{Ctx: 256}, Text: byteText{}}, &Request{Chat: &Chat{}})
	if err == nil || !strings.Contains(err.Error(), "no chat template") {
		t.Errorf("a model without a template: %v", err)
	}
}
