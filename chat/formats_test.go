package chat

import (
	"testing"

	"superfluid/synth"
)

const chatMLConversation = "<|im_start|>system\nYou are a terse assistant.<|im_end|>\n" +
	"<|im_start|>user\nWhat is 2+2?<|im_end|>\n" +
	"<|im_start|>assistant\n4.<|im_end|>\n" +
	"<|im_start|>user\nAnd 3+3?<|im_end|>\n"

func TestChatMLIsSynthTemplate(t *testing.T) {
	if ChatML != synth.ChatTemplate {
		t.Fatalf("chat.ChatML and synth.ChatTemplate differ:\n%q\n%q", ChatML, synth.ChatTemplate)
	}
}

func TestChatML(t *testing.T) {
	tmpl := mustParse(t, ChatML, Options{BOS: "<|endoftext|>", EOS: "<|endoftext|>"})
	if !tmpl.SupportsSystemRole() {
		t.Error("ChatML shows system messages, probe says it does not")
	}
	checkRender(t, tmpl, conversation, false, chatMLConversation)
	checkRender(t, tmpl, conversation, true, chatMLConversation+"<|im_start|>assistant\n")
	checkRender(t, tmpl, []Message{{Role: RoleUser, Content: "Hi"}}, true,
		"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
}

// TestFormats renders the conversation with templates transcribed into
// testdata/ and compares with each model's prompt format written out by
// hand. Templates that refuse system messages show the fold into the first
// user message.
func TestFormats(t *testing.T) {
	tests := []struct {
		file     string
		opts     Options
		system   bool
		agp      bool
		want     string
		wantNoGP string // rendering without the generation prompt, when it differs
	}{
		{
			file: "llama-3.jinja", opts: Options{BOS: "<|begin_of_text|>", EOS: "<|eot_id|>"}, system: true, agp: true,
			want: "<|begin_of_text|>" +
				"<|start_header_id|>system<|end_header_id|>\n\nYou are a terse assistant.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n4.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n",
		},
		{
			file: "llama-2.jinja", opts: Options{BOS: "<s>", EOS: "</s>"}, system: true, agp: true,
			want: "<s>[INST] <<SYS>>\nYou are a terse assistant.\n<</SYS>>\n\nWhat is 2+2? [/INST] 4. </s>" +
				"<s>[INST] And 3+3? [/INST]",
		},
		{
			// The user's system text is glued to "### Instruction:"; that is
			// the published template's own quirk.
			file: "deepseek-coder.jinja", opts: Options{BOS: "<｜begin▁of▁sentence｜>", EOS: "<|EOT|>"}, system: true, agp: true,
			want: "<｜begin▁of▁sentence｜>You are a terse assistant." +
				"### Instruction:\nWhat is 2+2?\n" +
				"### Response:\n4.\n<|EOT|>\n" +
				"### Instruction:\nAnd 3+3?\n" +
				"### Response:\n",
		},
		{
			file: "mistral-v0.1.jinja", opts: Options{BOS: "<s>", EOS: "</s>"}, system: false, agp: true,
			want: "<s>[INST] You are a terse assistant.\nWhat is 2+2? [/INST]4.</s>[INST] And 3+3? [/INST]",
		},
		{
			file: "gemma.jinja", opts: Options{BOS: "<bos>", EOS: "<eos>"}, system: false, agp: true,
			want: "<bos><start_of_turn>user\nYou are a terse assistant.\nWhat is 2+2?<end_of_turn>\n" +
				"<start_of_turn>model\n4.<end_of_turn>\n" +
				"<start_of_turn>user\nAnd 3+3?<end_of_turn>\n" +
				"<start_of_turn>model\n",
			wantNoGP: "<bos><start_of_turn>user\nYou are a terse assistant.\nWhat is 2+2?<end_of_turn>\n" +
				"<start_of_turn>model\n4.<end_of_turn>\n" +
				"<start_of_turn>user\nAnd 3+3?<end_of_turn>\n",
		},
		{
			file: "zephyr.jinja", opts: Options{BOS: "<s>", EOS: "</s>"}, system: true, agp: true,
			want: "<|system|>\nYou are a terse assistant.</s>\n" +
				"<|user|>\nWhat is 2+2?</s>\n" +
				"<|assistant|>\n4.</s>\n" +
				"<|user|>\nAnd 3+3?</s>\n" +
				"<|assistant|>\n",
		},
		{
			file: "qwen2.5-instruct.jinja", opts: Options{BOS: "<|endoftext|>", EOS: "<|im_end|>"}, system: true, agp: true,
			want:     chatMLConversation + "<|im_start|>assistant\n",
			wantNoGP: chatMLConversation,
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			tmpl := mustParse(t, testdataTemplate(t, tc.file), tc.opts)
			if got := tmpl.SupportsSystemRole(); got != tc.system {
				t.Errorf("SupportsSystemRole = %v, want %v", got, tc.system)
			}
			checkRender(t, tmpl, conversation, tc.agp, tc.want)
			if tc.wantNoGP != "" {
				checkRender(t, tmpl, conversation, !tc.agp, tc.wantNoGP)
			}
		})
	}
}

// TestDefaultSystemPrompts checks the branches taken when the conversation
// has no system message: templates that add their own.
func TestDefaultSystemPrompts(t *testing.T) {
	msgs := []Message{{Role: RoleUser, Content: "Sort a list in Go."}}

	ds := mustParse(t, testdataTemplate(t, "deepseek-coder.jinja"), Options{BOS: "<｜begin▁of▁sentence｜>"})
	checkRender(t, ds, msgs, true, "<｜begin▁of▁sentence｜>You are an AI programming assistant, utilizing the Deepseek Coder model, "+
		"developed by Deepseek Company, and you only answer questions related to computer science. "+
		"For politically sensitive questions, security and privacy issues, and other non-computer science questions, "+
		"you will refuse to answer\n### Instruction:\nSort a list in Go.\n### Response:\n")

	qw := mustParse(t, testdataTemplate(t, "qwen2.5-instruct.jinja"), Options{})
	checkRender(t, qw, msgs, true, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"+
		"<|im_start|>user\nSort a list in Go.<|im_end|>\n<|im_start|>assistant\n")
}

// TestToolMessages checks the tool role through Qwen 2.5's template, which
// groups consecutive tool results into one user turn.
func TestToolMessages(t *testing.T) {
	tmpl := mustParse(t, testdataTemplate(t, "qwen2.5-instruct.jinja"), Options{})
	msgs := []Message{
		{Role: RoleSystem, Content: "S"},
		{Role: RoleUser, Content: "Weather in Paris?"},
		{Role: RoleAssistant, Content: "Checking."},
		{Role: RoleTool, Content: `{"temp": 21}`},
		{Role: RoleTool, Content: "sunny"},
	}
	checkRender(t, tmpl, msgs, true, "<|im_start|>system\nS<|im_end|>\n"+
		"<|im_start|>user\nWeather in Paris?<|im_end|>\n"+
		"<|im_start|>assistant\nChecking.<|im_end|>\n"+
		"<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"+
		"<|im_start|>assistant\n")
}

// TestTokenizerAddsBOS checks that a template's own BOS is dropped when the
// tokenizer adds one, and only at the start.
func TestTokenizerAddsBOS(t *testing.T) {
	src := testdataTemplate(t, "llama-2.jinja")
	tmpl := mustParse(t, src, Options{BOS: "<s>", EOS: "</s>", TokenizerAddsBOS: true})
	checkRender(t, tmpl, conversation, true,
		"[INST] <<SYS>>\nYou are a terse assistant.\n<</SYS>>\n\nWhat is 2+2? [/INST] 4. </s><s>[INST] And 3+3? [/INST]")
}

// TestWhitespaceControl pins the transformers environment: trim_blocks,
// lstrip_blocks, "-" markers and the dropped trailing newline.
func TestWhitespaceControl(t *testing.T) {
	tests := []struct{ src, want string }{
		{"{% if true %}\nA\n{% endif %}\nB\n", "A\nB"},
		{"  {% if true %}A{% endif %}", "A"},
		{"x  {%- if true -%}  A  {%- endif -%}  y", "xAy"},
		{"{{ 'a' }}\n{{ 'b' }}", "a\nb"},
		{"{% for m in messages %}\n  {{ m.role }}\n{% endfor %}", "  user\n"},
	}
	for _, tc := range tests {
		tmpl := mustParse(t, tc.src, Options{})
		got, err := tmpl.Render([]Message{{Role: RoleUser, Content: "x"}}, false)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.src, got, tc.want)
		}
	}
}

// TestConstructs renders the expressions chat templates lean on. It calls
// exec directly: most of these templates never print a system message, so
// Render would fold it away.
func TestConstructs(t *testing.T) {
	msgs := []Message{{Role: RoleSystem, Content: "  S  "}, {Role: RoleUser, Content: "Hi there"}}
	tests := []struct{ src, want string }{
		{"{{ messages[0]['role'] }}|{{ messages[0].role }}|{{ messages[-1].content }}", "system|system|Hi there"},
		{"{% for m in messages[1:] %}{{ m.role }}{% endfor %}", "user"},
		{"{% for m in messages %}{{ loop.index0 }}{{ loop.index }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{% endfor %}", "01F12L"},
		{"{{ messages[0].content|trim }}|{{ messages[0].content.strip() }}|{{ messages|length }}", "S|S|2"},
		{"{{ 'a'|upper }}{{ 'B'|lower }}{{ undefined_thing|default('d') }}", "Abd"},
		{"{{ messages[-1]|tojson }}", `{"role": "user", "content": "Hi there"}`},
		{"{{ 'é\"'|tojson }}", `"é\""`},
		{"{% if 'there' in messages[1].content and messages[1].content.startswith('Hi') %}y{% endif %}", "y"},
		{"{% if x is defined %}d{% elif not x is defined %}u{% else %}e{% endif %}", "u"},
		{"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "2"},
		{"{{ 'a' + 'b' ~ 1 }}|{{ 1 < 2 and 2 >= 2 and 1 != 2 }}|{{ 7 % 2 }}", "ab1|True|1"},
		{"{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ add_generation_prompt }}", "<B>|<E>|True|False"},
		{"{% macro turn(r) %}[{{ r }}]{% endmacro %}{% for m in messages %}{{ turn(m.role) }}{% endfor %}", "[system][user]"},
	}
	for _, tc := range tests {
		tmpl := mustParse(t, tc.src, Options{BOS: "<B>", EOS: "<E>"})
		got, err := tmpl.Exact(Request{Messages: msgs})
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.src, got, tc.want)
		}
	}
}
