package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// ChatML is the template of the project's synthetic models (synth writes it)
// and the one to fall back on for a model file that carries none, as
// llama.cpp does.
const ChatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// Options are the tokenizer facts a template needs besides the messages.
type Options struct {
	// BOS and EOS are the text of the model's beginning- and end-of-sequence
	// tokens, which templates see as bos_token and eos_token.
	BOS, EOS string

	// TokenizerAddsBOS says the prompt will be tokenized with the model's
	// BOS token added in front. Render then removes a leading BOS text from
	// its output, so a template that writes bos_token itself (Llama 3,
	// Phi-3) does not give the model two; llama.cpp does the same.
	TokenizerAddsBOS bool

	// Now is the clock strftime_now reads; nil means time.Now. Tests fix it
	// so that templates printing today's date render the same every day.
	Now func() time.Time

	// Limits bound parsing and every render (see Limits); zero fields take
	// DefaultLimits.
	Limits Limits
}

// Template is a parsed chat template. It is immutable after Parse: any
// number of goroutines may call Render at once.
type Template struct {
	engine *jinja.Template
	opts   Options
	limits Limits
	// globals are the variables every render sees besides messages and
	// add_generation_prompt; read-only after Parse.
	globals map[string]jinja.Value
	system  bool
}

// probeText is the system message Parse renders to learn whether the
// template shows system messages. It is one word so that templates that trim
// or strip content still print it unchanged.
const probeText = "SystemProbe7f3c"

// probeTool is the tool Parse renders a template with when it cannot render
// a conversation without tools.
var probeTool = json.RawMessage(`{"type": "function", "function": {"name": "probe", "description": "Probe.", "parameters": {"type": "object", "properties": {}}}}`)

// Parse parses a chat template once for any number of renders. It fails on
// malformed template text and on a template that cannot render a single
// user message with a generation prompt, the least any chat template must
// do, so that a broken template is found when the model loads.
//
// A template crossing one of its Limits, in its text or in any of these
// trial renders, is refused with an error wrapping a *BoundError: a
// template that cannot stay within its bounds for a greeting is not one to
// serve.
func Parse(src string, opts Options) (*Template, error) {
	lim := opts.Limits.withDefaults()
	engine, err := compile(src, &lim)
	if err != nil {
		return nil, fmt.Errorf("chat: parse: %w", err)
	}
	t := &Template{engine: engine, opts: opts, limits: lim, globals: globals(opts)}
	hello := Request{Messages: []Message{{Role: RoleUser, Content: "Hello"}}, AddGenerationPrompt: true}
	if _, err := t.exec(hello); err != nil {
		if errors.Is(err, ErrBound) {
			return nil, fmt.Errorf("chat: parse: trial render: %w", err)
		}
		// Some templates are made for tool use alone (Hermes 2 Pro's
		// tool_use template loops over tools unconditionally).
		hello.Tools = []json.RawMessage{probeTool}
		if _, toolErr := t.exec(hello); toolErr != nil {
			if errors.Is(toolErr, ErrBound) {
				return nil, fmt.Errorf("chat: parse: trial render with a tool: %w", toolErr)
			}
			return nil, fmt.Errorf("chat: parse: template cannot render a single user message: %w", err)
		}
	}
	out, err := t.exec(Request{Messages: []Message{{Role: RoleSystem, Content: probeText}, {Role: RoleUser, Content: "Hello"}}, Tools: hello.Tools})
	if errors.Is(err, ErrBound) {
		return nil, fmt.Errorf("chat: parse: trial render with a system message: %w", err)
	}
	t.system = err == nil && strings.Contains(out, probeText)
	return t, nil
}

// SupportsSystemRole reports whether the template shows a system message
// given as the first message. When it does not, Render folds system
// messages into user messages (see the package doc).
func (t *Template) SupportsSystemRole() bool { return t.system }

// Render renders msgs into prompt text. With addGenerationPrompt the prompt
// ends where the assistant's reply begins (templates that always open the
// assistant turn, like Phi-3's, ignore it). Any error means this template
// cannot render this conversation; see the package doc.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.Prompt(Request{Messages: msgs, AddGenerationPrompt: addGenerationPrompt})
}

// Prompt renders r into the text the model is prompted with: Exact's
// rendering, with system messages folded into user messages for a template
// that cannot show them, and the leading BOS text removed when the
// tokenizer adds its own.
func (t *Template) Prompt(r Request) (string, error) {
	if err := checkMessages(r.Messages); err != nil {
		return "", err
	}
	if !t.system {
		r.Messages = foldSystem(r.Messages)
	}
	out, err := t.Exact(r)
	if err != nil {
		return "", err
	}
	if t.opts.TokenizerAddsBOS && t.opts.BOS != "" {
		out = strings.TrimPrefix(out, t.opts.BOS)
	}
	return out, nil
}

// Exact renders r as transformers' apply_chat_template does, byte for byte:
// no system fold, no BOS removal. A template refusing the conversation
// (raise_exception, or an error the reference raises too) is an error.
func (t *Template) Exact(r Request) (string, error) {
	out, err := t.exec(r)
	if err != nil {
		return "", fmt.Errorf("chat: render: %w", err)
	}
	return out, nil
}

// exec runs the engine on msgs as they are, on a fresh budget. A bound
// crossed is returned as the *BoundError it is, whatever the engine made
// of it. A panic in the engine becomes an error: one bad template or
// request must not take the server down (the bounds keep the engine from
// the stack overflow and the allocation no recover could catch).
func (t *Template) exec(r Request) (string, error) {
	out, _, err := t.execCounted(r)
	return out, err
}

// execCounted is exec, returning the render's budget too (tests read what
// real templates use of it).
func (t *Template) execCounted(r Request) (out string, b *budget, err error) {
	b = newBudget(&t.limits)
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w: %v", errEnginePanic, r)
		}
		if b.err != nil {
			out, err = "", b.err
		}
	}()
	calls := budgetCalls(b)
	vars := make(map[string]jinja.Value, len(t.globals)+len(calls)+len(r.Kwargs)+3)
	for k, raw := range r.Kwargs {
		v, err := jsonValue(raw)
		if err != nil {
			return "", b, fmt.Errorf("template variable %q: %w", k, err)
		}
		vars[k] = v
	}
	for k, v := range t.globals {
		vars[k] = v
	}
	for k, v := range calls {
		vars[k] = v
	}
	msgs, err := messageValues(r.Messages)
	if err != nil {
		return "", b, err
	}
	vars["messages"] = msgs
	vars["add_generation_prompt"] = jinja.NewBool(r.AddGenerationPrompt)
	if len(r.Tools) > 0 {
		tools := make([]jinja.Value, len(r.Tools))
		for i, raw := range r.Tools {
			if tools[i], err = jsonValue(raw); err != nil || !tools[i].IsDict() {
				return "", b, fmt.Errorf("tool %d: %w", i, ErrBadTool)
			}
		}
		vars["tools"] = jinja.NewList(tools)
	}
	out, err = t.engine.RenderValues(vars)
	return out, b, err
}

// compile checks src against the static bounds, rewrites it for the
// sandbox and parses it, turning an engine panic into an error like exec
// does.
func compile(src string, lim *Limits) (tmpl *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			tmpl, err = nil, fmt.Errorf("%w: %v", errEnginePanic, r)
		}
	}()
	prepared, err := prepareSource(src, lim)
	if err != nil {
		return nil, err
	}
	return jinja.Compile(prepared)
}

// globals builds the variables transformers passes besides the messages.
// raise_exception shadows the engine's builtin so that a template's refusal
// comes back as a *RaiseError the caller can tell apart and show.
func globals(opts Options) map[string]jinja.Value {
	return map[string]jinja.Value{
		"bos_token":       jinja.NewString(opts.BOS),
		"eos_token":       jinja.NewString(opts.EOS),
		"tools":           jinja.None(),
		"documents":       jinja.None(),
		"raise_exception": jinja.NewCallable("raise_exception", raiseException),
		"strftime_now":    jinja.NewCallable("strftime_now", strftimeNow(opts.Now)),
		unsafeFilter:      jinja.NewCallable(unsafeFilter, unsafeMethod),
	}
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), &RaiseError{Message: "raise_exception called without a message"}
	}
	msg := args[0].String()
	if args[0].IsString() {
		msg = args[0].AsString()
	}
	return jinja.Undefined(), &RaiseError{Message: msg}
}
