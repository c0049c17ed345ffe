package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"superfluid/http/wire"
	"superfluid/task"
)

// Items as a conversation keeps them: an input item of any of the shapes
// the Responses API takes (a string content, an EasyInputMessage without a
// type, arguments as an object) is stored in the one shape OpenAI lists
// it in, with an id of its own, so that listing a conversation answers
// what the official clients decode, and reading it back as input
// (respConversation) gives the same messages.

// Item is one conversation item: its id, its type, and the item as the
// API shapes it (the id included).
type Item struct {
	ID, Type string
	Data     json.RawMessage
}

// ItemPrefix is the id prefix of an item of type typ.
func ItemPrefix(typ string) string {
	switch typ {
	case "message":
		return "msg_"
	case "function_call":
		return "fc_"
	case "function_call_output":
		return "fco_"
	case "reasoning":
		return "rs_"
	}
	return "item_"
}

// storedMessage, storedCallOutput and storedReasoning are the items as
// OpenAI lists them (a function call is an output item, respItemOut).
type storedMessage struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Status  string          `json:"status"`
	Role    string          `json:"role"`
	Content []storedContent `json:"content"`
}

type storedContent struct {
	Type        string      `json:"type"`
	Text        string      `json:"text,omitempty"`
	Refusal     string      `json:"refusal,omitempty"`
	Annotations *[]struct{} `json:"annotations,omitempty"`
	Logprobs    *[]struct{} `json:"logprobs,omitempty"`
	// input_image: the image as sent (a data URL, an http(s) URL or a
	// file's id).
	ImageURL string `json:"image_url,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

type storedCallOutput struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	Status string          `json:"status"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
}

type storedReasoning struct {
	ID      string         `json:"id"`
	Type    string         `json:"type"`
	Summary []respTextPart `json:"summary"`
	Content []respTextPart `json:"content,omitempty"`
}

// NewItems reads input items into conversation items, each with a fresh
// id. An item the Responses API would refuse as input is refused here,
// named as param[i].
func NewItems(raws []json.RawMessage, param string) ([]Item, error) {
	out := make([]Item, 0, len(raws))
	for i, raw := range raws {
		it, err := newItem(raw)
		if err != nil {
			return nil, wire.BadParam(param, "%s[%d]%s", param, i, err.Error())
		}
		out = append(out, it)
	}
	return out, nil
}

// itemError is an input item's fault, worded after the item's index:
// ".role: …" or ": …".
type itemError string

func (e itemError) Error() string { return string(e) }

func itemErr(field, format string, args ...any) error {
	if field != "" {
		field = "." + field
	}
	return itemError(field + ": " + fmt.Sprintf(format, args...))
}

func newItem(raw json.RawMessage) (Item, error) {
	var it respItemIn
	if err := json.Unmarshal(raw, &it); err != nil {
		return Item{}, itemErr("", "not an input item (%v)", err)
	}
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	id := wire.NewID(ItemPrefix(it.Type))
	var v any
	switch it.Type {
	case "message":
		content, err := storedParts(it.Role, it.Content)
		if err != nil {
			return Item{}, err
		}
		v = storedMessage{ID: id, Type: it.Type, Status: "completed", Role: it.Role, Content: content}
	case "function_call":
		if it.Name == "" {
			return Item{}, itemErr("name", "a function call needs a name")
		}
		if it.CallID == "" {
			return Item{}, itemErr("call_id", "a function call needs a call_id")
		}
		args, err := wire.CallArguments(it.Arguments)
		if err != nil {
			return Item{}, itemErr("arguments", "%v", err)
		}
		v = respItemOut{ID: id, Type: it.Type, Status: "completed", CallID: it.CallID, Name: it.Name, Arguments: string(args)}
	case "function_call_output":
		if it.CallID == "" {
			return Item{}, itemErr("call_id", "a function call output needs the call_id of its call")
		}
		if _, err := respOutputText(it.Output); err != nil {
			return Item{}, itemErr("output", "%v", err)
		}
		v = storedCallOutput{ID: id, Type: it.Type, Status: "completed", CallID: it.CallID, Output: it.Output}
	case "reasoning":
		var content []respTextPart
		if !task.IsNull(it.Content) && json.Unmarshal(it.Content, &content) != nil {
			return Item{}, itemErr("content", "expected a list of reasoning_text parts")
		}
		summary := it.Summary
		if summary == nil {
			summary = []respTextPart{}
		}
		v = storedReasoning{ID: id, Type: it.Type, Summary: summary, Content: content}
	case "":
		return Item{}, itemErr("type", "type is required")
	default:
		return Item{}, itemErr("type", "%q items are not supported (message, function_call, function_call_output and reasoning are)", it.Type)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return Item{}, itemErr("", "%v", err)
	}
	return Item{ID: id, Type: it.Type, Data: data}, nil
}

// storedParts reads a message's content into its parts: input_text for
// what the user, system or developer said, output_text for the
// assistant's.
func storedParts(role string, raw json.RawMessage) ([]storedContent, error) {
	switch role {
	case "user", "system", "developer", "assistant":
	default:
		return nil, itemErr("role", "%q is not user, assistant, system or developer", role)
	}
	text := func(s string) storedContent {
		if role == "assistant" {
			return storedContent{Type: "output_text", Text: s, Annotations: &[]struct{}{}, Logprobs: &[]struct{}{}}
		}
		return storedContent{Type: "input_text", Text: s}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []storedContent{text(s)}, nil
	}
	if task.IsNull(raw) {
		return []storedContent{}, nil
	}
	var parts []respTextPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, itemErr("content", "expected a string or a list of content parts")
	}
	out := make([]storedContent, 0, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, text(p.Text))
		case "refusal":
			out = append(out, storedContent{Type: "refusal", Refusal: p.Refusal})
		case "input_image":
			if err := storableImage(role, j, p); err != nil {
				return nil, err
			}
			out = append(out, storedContent{Type: p.Type, ImageURL: p.ImageURL, FileID: p.FileID, Detail: p.Detail})
		default:
			return nil, itemErr(fmt.Sprintf("content[%d]", j), "%q parts are not supported (%s)", p.Type, wire.WhyModality)
		}
	}
	return out, nil
}

// outputItems are a finished response's output items as a conversation
// keeps them (their ids are the response's).
func outputItems(out []respItemOut) ([]Item, error) {
	items := make([]Item, 0, len(out))
	for _, o := range out {
		data, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("output item %s: %w", o.ID, err)
		}
		items = append(items, Item{ID: o.ID, Type: o.Type, Data: data})
	}
	return items, nil
}

// MaxIDLen bounds an id a client sends (the server's are under 40
// characters).
const MaxIDLen = 64

// CheckID refuses, before any look-up, an id that is too long, holds
// characters no id holds, or lacks the prefix its kind has ("" for any).
func CheckID(id, param, prefix string) error {
	ok := len(id) > len(prefix) && len(id) <= MaxIDLen && strings.HasPrefix(id, prefix)
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	if ok {
		return nil
	}
	if prefix != "" {
		return wire.BadParam(param, "Invalid '%s': %.80q. Expected an ID that begins with '%s' and holds at most %d letters, digits, '_' or '-'.", param, id, strings.TrimSuffix(prefix, "_"), MaxIDLen)
	}
	return wire.BadParam(param, "Invalid '%s': %.80q. Expected at most %d letters, digits, '_' or '-'.", param, id, MaxIDLen)
}
