package anthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"log/slog"
	"strings"

	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// The Anthropic request's tools, tool_choice and thinking, read into a
// task.Chat; and the class a tool-carrying request runs in.

// readTools reads tools and tool_choice. Client tools ({name,
// description, input_schema}, type absent or "custom") are offered to the
// model; Anthropic's server tools (web_search_…, bash_…, text_editor_…,
// code_execution_…), which only Anthropic's servers run, are skipped with
// a warning rather than refused: agents send them on every request
// whether the backend runs them or not. The tools' cache breakpoints are
// returned by the count of client tools up to and including each.
func readTools(req *request) (task.Tools, []int, []string, error) {
	var list []reply.Tool
	var marks []int
	var ttls []string
	if !task.IsNull(req.Tools) {
		var defs []json.RawMessage
		if err := json.Unmarshal(req.Tools, &defs); err != nil {
			return task.Tools{}, nil, nil, wire.BadParam("tools", "tools: Input should be a valid list")
		}
		for i, d := range defs {
			var t tool
			if err := json.Unmarshal(d, &t); err != nil {
				return task.Tools{}, nil, nil, wire.BadParam("tools", "tools.%d: Input should be a valid tool definition", i)
			}
			if t.Type != "" && t.Type != "custom" {
				slog.Warn("anthropic: skipping a server tool this server cannot run", "type", t.Type, "name", t.Name)
				continue
			}
			if t.Name == "" {
				return task.Tools{}, nil, nil, wire.BadParam("tools", "tools.%d.name: Field required", i)
			}
			list = append(list, reply.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
			if t.CacheControl != nil {
				marks, ttls = append(marks, len(list)), append(ttls, t.CacheControl.TTL)
			}
		}
	}
	tt, err := task.NewTools("tools", list)
	if err != nil {
		return tt, nil, nil, err
	}
	mode, name, single, err := readToolChoice(req.ToolChoice)
	if err != nil {
		return tt, nil, nil, err
	}
	return tt, marks, ttls, wire.Convert(tt.Require("tool_choice", mode, name, single))
}

// readToolChoice maps tool_choice onto task.Tools' modes: auto, any (a
// call is required), tool (that tool is required), none;
// disable_parallel_tool_use allows one call at most.
func readToolChoice(raw json.RawMessage) (mode, name string, single bool, err error) {
	if task.IsNull(raw) {
		return "auto", "", false, nil
	}
	var c toolChoice
	if json.Unmarshal(raw, &c) != nil {
		return "", "", false, wire.BadParam("tool_choice", "tool_choice: Input should be an object with a type")
	}
	switch c.Type {
	case "auto", "none":
		mode = c.Type
	case "any":
		mode = "required"
	case "tool":
		if c.Name == "" {
			return "", "", false, wire.BadParam("tool_choice", "tool_choice.name: Field required")
		}
		mode, name = "named", c.Name
	default:
		return "", "", false, wire.BadParam("tool_choice", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
	}
	return mode, name, c.DisableParallelToolUse, nil
}

// thinkingOf reads thinking: enabled (with budget_tokens, which
// Anthropic requires to be at least 1024 and below max_tokens) and
// adaptive turn the template's reasoning on, disabled turns it off, and
// absent leaves the template's default. The budget is validated, not
// enforced: the engine has no way to close a reasoning block early, so
// reasoning is bounded by max_tokens alone. display "omitted" keeps the
// blocks and their signatures but not their text, as Anthropic does.
func thinkingOf(raw json.RawMessage, maxTokens int) (think *bool, omit bool, err error) {
	if task.IsNull(raw) {
		return nil, false, nil
	}
	var t thinkingConfig
	if json.Unmarshal(raw, &t) != nil {
		return nil, false, wire.BadParam("thinking", "thinking: Input should be an object with a type")
	}
	on := true
	switch t.Type {
	case "enabled":
		if t.BudgetTokens == nil {
			return nil, false, wire.BadParam("thinking", "thinking.enabled.budget_tokens: Field required")
		}
		if *t.BudgetTokens < 1024 {
			return nil, false, wire.BadParam("thinking", "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		}
		if *t.BudgetTokens >= maxTokens {
			return nil, false, wire.BadParam("thinking", "`max_tokens` must be greater than `thinking.budget_tokens`")
		}
	case "adaptive":
	case "disabled":
		on = false
	default:
		return nil, false, wire.BadParam("thinking", "thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'")
	}
	switch t.Display {
	case "", "summarized":
	case "omitted":
		omit = true
	default:
		return nil, false, wire.BadParam("thinking", "thinking.display: Input should be 'summarized' or 'omitted'")
	}
	return &on, omit && on, nil
}

// thinkingSignature is a thinking block's signature. Anthropic's is an
// encrypted digest clients must send back untouched; the SDKs and agents
// require one present, and this server checks none, so a digest of the
// text serves.
func thinkingSignature(thinking string) string {
	h := sha256.New()
	h.Write([]byte(thinking))
	return signatureOf(h)
}

// signatureOf is the signature of the thinking h has hashed, for the
// streamed blocks, which hash their text as it comes.
func signatureOf(h hash.Hash) string { return "sf1" + hex.EncodeToString(h.Sum(nil)[:16]) }

// billingHeader opens the first system block Claude Code sends:
// "x-anthropic-billing-header: cc_version=…; cc_entrypoint=cli; cch=…;".
// The cch value changes with every request, so a prompt that keeps it
// shares no prefix with the previous turn's.
const billingHeader = "x-anthropic-billing-header:"

// dropBillingHeader removes the billing header line from text when text
// begins with it.
func dropBillingHeader(text string) string {
	if len(text) < len(billingHeader) || !strings.EqualFold(text[:len(billingHeader)], billingHeader) {
		return text
	}
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		return text[i+1:]
	}
	return ""
}
