package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/task"
)

// The Anthropic conversation: system blocks, then turns of content blocks,
// mapped onto the template's messages. An assistant turn's thinking blocks
// become its reasoning, its text its content, its tool_use blocks its tool
// calls; a user turn's tool_result blocks become tool messages, in order,
// each tied to the call it answers.

// conversation is a request's system prompt and messages with their content read into
// blocks (a string content is one text block).
type conversation struct {
	system []block
	msgs   []turnBlocks
}

// turnBlocks is one message of the conversation: its role and its blocks.
type turnBlocks struct {
	role   string
	blocks []block
}

// parseTurns reads system and messages. keepBilling keeps the billing
// header of Claude Code's first system block, which is otherwise dropped
// (it is a nonce that defeats the prefix cache).
func parseTurns(req *request, keepBilling bool) (conversation, error) {
	var t conversation
	if len(req.Messages) == 0 {
		return t, wire.BadParam("messages", "messages: at least one message is required")
	}
	var err error
	if t.system, err = readBlocks("system", req.System, true); err != nil {
		return t, err
	}
	for i, b := range t.system {
		if b.Type != "text" {
			return t, wire.BadParam("system", "system.%d: content blocks of type %q are not supported in system (text only)", i, b.Type)
		}
	}
	if len(t.system) > 0 && !keepBilling {
		text := dropBillingHeader(*t.system[0].Text)
		t.system[0].Text = &text
	}
	for i, msg := range req.Messages {
		if msg.Role != chat.RoleUser && msg.Role != chat.RoleAssistant && msg.Role != chat.RoleSystem {
			return t, wire.BadParam("messages", "messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
		}
		blocks, err := readBlocks("messages."+strconv.Itoa(i)+".content", msg.Content, false)
		if err != nil {
			return t, err
		}
		t.msgs = append(t.msgs, turnBlocks{role: msg.Role, blocks: blocks})
	}
	return t, nil
}

// readBlocks reads content: a string, or an array of blocks, each
// checked for the fields its type needs. Types the server cannot read
// (image, document …) are refused by name.
func readBlocks(field string, raw json.RawMessage, optional bool) ([]block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if optional {
			return nil, nil
		}
		return nil, wire.BadParam(field, "%s: Field required", field)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, wire.BadParam(field, "%s: invalid string", field)
		}
		return []block{{Type: "text", Text: &s}}, nil
	}
	var blocks []block
	if raw[0] != '[' || json.Unmarshal(raw, &blocks) != nil {
		return nil, wire.BadParam(field, "%s: Input should be a valid string or a list of content blocks", field)
	}
	for i, b := range blocks {
		at := field + "." + strconv.Itoa(i)
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, wire.BadParam(field, "%s.text: Field required", at)
			}
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return nil, wire.BadParam(field, "%s: a tool_use block needs an id and a name", at)
			}
			if in := bytes.TrimSpace(b.Input); len(in) > 0 && (in[0] != '{' || !json.Valid(in)) {
				return nil, wire.BadParam(field, "%s.input: Input should be a valid dictionary", at)
			}
		case "tool_result":
			if b.ToolUseID == "" {
				return nil, wire.BadParam(field, "%s.tool_use_id: Field required", at)
			}
			if _, err := toolResultText(at, b); err != nil {
				return nil, err
			}
		case "thinking":
			if b.Thinking == nil {
				return nil, wire.BadParam(field, "%s.thinking: Field required", at)
			}
		case "redacted_thinking":
			// Another server's encrypted reasoning: nothing a template can show.
		case "image":
			img, err := readImage(at, b.Source)
			if err != nil {
				return nil, wire.BadParam(field, "%v", err)
			}
			blocks[i].image = img
			if img == nil {
				blocks[i].imageURL = b.Source.URL
			}
		default:
			return nil, wire.BadParam(field, "%s: content blocks of type %q are not supported", at, b.Type)
		}
	}
	return blocks, nil
}

// readImage decodes an image block's base64 source, bounded before
// decoding; the image itself is checked with the request's others
// (task.NewMediaPrompt). A url source's image is nil here: its URL is
// checked, and fetched later (wire.FetchMedia).
func readImage(at string, src *imageSource) ([]byte, error) {
	switch {
	case src == nil:
		return nil, fmt.Errorf("%s.source: Field required (an image block needs a base64 or url source)", at)
	case src.Type == "url":
		if err := media.CheckURL(src.URL); err != nil {
			return nil, fmt.Errorf("%s.source.url: %v", at, err)
		}
		return nil, nil
	case src.Type != "base64":
		return nil, fmt.Errorf("%s.source.type: %q is not supported (base64 or url)", at, src.Type)
	case src.MediaType != "" && !strings.HasPrefix(src.MediaType, "image/"):
		return nil, fmt.Errorf("%s.source.media_type: %q is not an image type", at, src.MediaType)
	}
	b, err := media.DecodeBase64(src.Data, wire.MaxMediaBytes)
	if err != nil {
		return nil, fmt.Errorf("%s.source.data: %v", at, err)
	}
	if media.IsAudio(b) {
		// The core takes audio where its bytes say so; this API's
		// blocks carry images only.
		return nil, fmt.Errorf("%s.source.data: audio, not an image (image blocks carry images only)", at)
	}
	return b, nil
}

// images are the conversation's images in the order their markers appear
// in its messages, a url source's slot nil and named in remote; an image
// outside a user turn is refused (a template may drop other turns'
// content).
func (t conversation) images() (out [][]byte, remote []media.Remote, err error) {
	for i, turn := range t.msgs {
		for j, b := range turn.blocks {
			if b.Type != "image" {
				continue
			}
			if turn.role != chat.RoleUser {
				return nil, nil, wire.BadParam("messages", "messages.%d: image blocks are taken in user turns only", i)
			}
			if len(out) == media.MaxImages {
				return nil, nil, wire.BadParam("messages", "messages.%d: a request carries at most %d images", i, media.MaxImages)
			}
			if b.imageURL != "" {
				remote = append(remote, media.Remote{Index: len(out), URL: b.imageURL, Field: "messages", At: fmt.Sprintf("messages.%d.content.%d.source.url", i, j)})
			}
			out = append(out, b.image)
		}
	}
	return out, remote, nil
}

// toolResultText is a tool_result's content as text: a string, or its
// text blocks joined by a blank line. A failed call (is_error) is marked
// in the text ("Error: …"), since templates have no field for it. The
// content is read one level deep only: a block inside is refused
// unless it is text, so nested results cannot make the server re-read a
// deep body once per level.
func toolResultText(field string, b block) (string, error) {
	raw := bytes.TrimSpace(b.Content)
	var texts []string
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", wire.BadParam(field, "%s.content: invalid string", field)
		}
		texts = append(texts, s)
	default:
		var parts []block
		if raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
			return "", wire.BadParam(field, "%s.content: Input should be a valid string or a list of content blocks", field)
		}
		for i, p := range parts {
			if p.Type != "text" {
				return "", wire.BadParam(field, "%s.content.%d: tool results of type %q are not supported (text only)", field, i, p.Type)
			}
			if p.Text == nil {
				return "", wire.BadParam(field, "%s.content.%d.text: Field required", field, i)
			}
			texts = append(texts, *p.Text)
		}
	}
	text := strings.Join(texts, "\n\n")
	if b.IsError {
		text = "Error: " + text
	}
	return text, nil
}

// chat maps the turns onto chat messages: the system prompt first, then
// the turns (the current API also allows system turns among them). As in
// Anthropic's API, consecutive turns of the same role are combined, every
// message but a final assistant one needs content, and a final assistant
// message of text is the start of the reply (prefill), which must not end
// in whitespace. Text blocks of one message are joined by a blank line.
// A prefix (a cache breakpoint's conversation) skips the checks that only
// a whole conversation must pass.
func (t conversation) chat(prefix bool) ([]chat.Message, error) {
	var out []chat.Message
	if system := joinText(t.system); system != "" {
		out = append(out, chat.Message{Role: chat.RoleSystem, Content: system})
	}
	names := map[string]string{} // tool_use id → tool name
	for i, turn := range t.msgs {
		final := i == len(t.msgs)-1 && turn.role == chat.RoleAssistant
		msgs := turnMessages(turn, names)
		if len(msgs) == 0 && !final && !prefix {
			return nil, wire.BadParam("messages", "messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		if final && !prefix && len(msgs) > 0 && len(msgs[len(msgs)-1].ToolCalls) == 0 {
			if text := msgs[len(msgs)-1].Content; strings.TrimRightFunc(text, unicode.IsSpace) != text {
				return nil, wire.BadParam("messages", "final assistant content cannot end with trailing whitespace")
			}
		}
		if len(msgs) == 0 && final {
			msgs = []chat.Message{{Role: chat.RoleAssistant}}
		}
		for _, msg := range msgs {
			out = appendMerged(out, msg)
		}
	}
	return task.CallOnlyTurns(out), nil
}

// turnMessages maps one turn: a user turn's tool results become tool
// messages where they stand, its text a user message; an assistant turn
// becomes one message with its reasoning, text and calls. A turn of
// nothing but empty text maps to no message.
func turnMessages(turn turnBlocks, names map[string]string) []chat.Message {
	var out []chat.Message
	cur := chat.Message{Role: turn.role}
	var texts, thoughts []string
	flush := func() {
		cur.Content, cur.ReasoningContent = joinStrings(texts), joinStrings(thoughts)
		if cur.Content != "" || cur.ReasoningContent != "" || len(cur.ToolCalls) > 0 {
			out = append(out, cur)
		}
		cur, texts, thoughts = chat.Message{Role: turn.role}, nil, nil
	}
	for _, b := range turn.blocks {
		switch b.Type {
		case "text":
			texts = append(texts, *b.Text)
		case "thinking":
			thoughts = append(thoughts, *b.Thinking)
		case "image":
			texts = append(texts, task.MediaMarker)
		case "tool_use":
			args := bytes.TrimSpace(b.Input)
			if len(args) == 0 {
				args = []byte(`{}`)
			}
			names[b.ID] = b.Name
			cur.ToolCalls = append(cur.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: json.RawMessage(args)})
		case "tool_result":
			flush()
			text, _ := toolResultText("", b) // checked by readBlocks
			out = append(out, chat.Message{Role: chat.RoleTool, Content: text, ToolCallID: b.ToolUseID, Name: names[b.ToolUseID]})
		}
	}
	flush()
	return out
}

// appendMerged appends msg, combining it with the message before when both
// are of the same role (tool messages, each answering its own call, stay
// apart).
func appendMerged(out []chat.Message, msg chat.Message) []chat.Message {
	n := len(out)
	if n == 0 || out[n-1].Role != msg.Role || msg.Role == chat.RoleTool {
		return append(out, msg)
	}
	prev := &out[n-1]
	prev.Content = joinStrings([]string{prev.Content, msg.Content})
	prev.ReasoningContent = joinStrings([]string{prev.ReasoningContent, msg.ReasoningContent})
	prev.ToolCalls = append(prev.ToolCalls, msg.ToolCalls...)
	return out
}

// joinText joins the texts of text blocks by a blank line, skipping empty
// ones (a system block that held only the billing header).
func joinText(blocks []block) string {
	texts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Text != nil {
			texts = append(texts, *b.Text)
		}
	}
	return joinStrings(texts)
}

func joinStrings(parts []string) string {
	kept := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "\n\n")
}
