package chat

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// alternating is a small template that refuses a conversation whose roles
// do not alternate, as Mistral's and Gemma's do.
const alternating = "{% for m in messages %}" +
	"{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}" +
	"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}" +
	"{% endif %}[{{ m.role }}]{{ m.content }}{% endfor %}"

func TestRaiseException(t *testing.T) {
	tests := []struct {
		name, src string
		msgs      []Message
		want      string
	}{
		{"small", alternating, []Message{{Role: RoleUser, Content: "a"}, {Role: RoleUser, Content: "b"}},
			"Conversation roles must alternate user/assistant/user/assistant/..."},
		{"mistral", testdataTemplate(t, "mistral-v0.1.jinja"), []Message{{Role: RoleAssistant, Content: "a"}},
			"Conversation roles must alternate user/assistant/user/assistant/..."},
		{"mistral tool", testdataTemplate(t, "mistral-v0.1.jinja"), []Message{{Role: RoleUser, Content: "a"}, {Role: RoleTool, Content: "b"}},
			"Only user and assistant roles are supported!"},
		{"gemma", testdataTemplate(t, "gemma.jinja"), []Message{{Role: RoleUser, Content: "a"}, {Role: RoleUser, Content: "b"}},
			"Conversation roles must alternate user/assistant/user/assistant/..."},
		{"message from content", "{% if messages|length > 1 %}{{ raise_exception('too many: ' ~ messages[1].content) }}{% endif %}",
			[]Message{{Role: RoleUser, Content: "a"}, {Role: RoleAssistant, Content: "b"}}, "too many: b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := mustParse(t, tc.src, Options{}).Render(tc.msgs, true)
			if err == nil {
				t.Fatalf("no error, rendered %q", out)
			}
			if out != "" {
				t.Errorf("output %q returned with error", out)
			}
			var re *RaiseError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T) is not a *RaiseError", err, err)
			}
			if re.Message != tc.want {
				t.Errorf("Message = %q, want %q", re.Message, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "chat: ") {
				t.Errorf("error %q lacks the chat: prefix", err)
			}
		})
	}
}

// TestSystemFoldAvoidsRaise checks that a template raising on any system
// message still renders one, folded into the user turn.
func TestSystemFoldAvoidsRaise(t *testing.T) {
	tmpl := mustParse(t, "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"+
		"{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}", Options{})
	if tmpl.SupportsSystemRole() {
		t.Fatal("SupportsSystemRole = true for a template that raises on it")
	}
	checkRender(t, tmpl, []Message{{Role: RoleSystem, Content: "S"}, {Role: RoleUser, Content: "U"}}, true, "<user>S\nU")
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, src string }{
		{"unclosed if", "{% if add_generation_prompt %}x"},
		{"unclosed for", "{% for m in messages %}{{ m.content }}"},
		{"unclosed expression", "{{ messages[0].content "},
		{"bad expression", "{{ + }}"},
		{"stray endfor", "{% endfor %}"},
		{"unknown tag", "{% frobnicate %}"},
		{"unknown filter", "{{ messages[0].content | frobnicate }}"},
		{"unknown function", "{{ frobnicate(messages) }}"},
		{"raises on one user message", "{{ raise_exception('never') }}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := Parse(tc.src, Options{})
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tc.src)
			}
			if tmpl != nil {
				t.Error("non-nil Template with error")
			}
			if !strings.HasPrefix(err.Error(), "chat: parse: ") {
				t.Errorf("error %q lacks the chat: parse: prefix", err)
			}
			if errors.Is(err, errEnginePanic) {
				t.Errorf("engine panicked: %v", err)
			}
		})
	}
}

// TestRenderErrors covers failures that only some conversations reach: an
// unknown filter in a branch the probe does not take, an unknown role, no
// messages.
func TestRenderErrors(t *testing.T) {
	tmpl := mustParse(t, "{% for m in messages %}{% if m.role == 'assistant' %}{{ m.content | frobnicate }}{% else %}{{ m.content }}{% endif %}{% endfor %}", Options{})
	_, err := tmpl.Render([]Message{{Role: RoleUser, Content: "a"}, {Role: RoleAssistant, Content: "b"}}, false)
	if err == nil || !strings.Contains(err.Error(), "frobnicate") || !strings.HasPrefix(err.Error(), "chat: render: ") {
		t.Errorf("unknown filter: err = %v", err)
	}

	chatml := mustParse(t, ChatML, Options{})
	_, err = chatml.Render([]Message{{Role: "wizard", Content: "a"}}, false)
	if !errors.Is(err, ErrUnknownRole) || !strings.Contains(err.Error(), `"wizard"`) {
		t.Errorf("unknown role: err = %v", err)
	}
	if _, err = chatml.Render(nil, true); !errors.Is(err, ErrNoMessages) {
		t.Errorf("no messages: err = %v", err)
	}
}

func TestFoldSystem(t *testing.T) {
	s := func(c string) Message { return Message{Role: RoleSystem, Content: c} }
	u := func(c string) Message { return Message{Role: RoleUser, Content: c} }
	a := func(c string) Message { return Message{Role: RoleAssistant, Content: c} }
	tests := []struct {
		name     string
		in, want []Message
	}{
		{"none", []Message{u("x"), a("y")}, []Message{u("x"), a("y")}},
		{"first", []Message{s("S"), u("x")}, []Message{u("S\nx")}},
		{"joined", []Message{s("S1"), s("S2"), u("x")}, []Message{u("S1\nS2\nx")}},
		{"empty user", []Message{s("S"), u("")}, []Message{u("S")}},
		{"empty system", []Message{s(""), u("x")}, []Message{u("x")}},
		{"before assistant", []Message{s("S"), a("y"), u("x")}, []Message{u("S"), a("y"), u("x")}},
		{"middle", []Message{u("x"), a("y"), s("S"), u("z")}, []Message{u("x"), a("y"), u("S\nz")}},
		{"trailing", []Message{u("x"), s("S")}, []Message{u("x"), u("S")}},
	}
	for _, tc := range tests {
		in := append([]Message(nil), tc.in...)
		got := foldSystem(in)
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], tc.want[i]) {
				t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
				break
			}
		}
		for i := range in {
			if !reflect.DeepEqual(in[i], tc.in[i]) {
				t.Errorf("%s: input modified", tc.name)
			}
		}
	}
}

// TestContentIsData checks that template syntax inside a message is
// printed, never executed.
func TestContentIsData(t *testing.T) {
	tmpl := mustParse(t, ChatML, Options{})
	evil := "{{ raise_exception('x') }}{% for m in messages %}{% endfor %}{# c #}"
	checkRender(t, tmpl, []Message{{Role: RoleUser, Content: evil}}, false, "<|im_start|>user\n"+evil+"<|im_end|>\n")
}

// A message without content reaches the template as none, as transformers
// passes OpenAI's null; an empty string stays a string.
func TestNoContentIsNone(t *testing.T) {
	tmpl, err := Parse(`{% for m in messages %}{% if m.content is none %}N{% else %}S{% endif %}{% endfor %}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	call := []ToolCall{{ID: "c1", Name: "f", Arguments: []byte(`{}`)}}
	out, err := tmpl.Exact(Request{Messages: []Message{{Role: RoleUser, Content: "x"},
		{Role: RoleAssistant, NoContent: true, ToolCalls: call}, {Role: RoleAssistant, ToolCalls: call}}})
	if err != nil {
		t.Fatal(err)
	}
	if out != "SNS" {
		t.Errorf("rendered %q, want SNS", out)
	}
}
