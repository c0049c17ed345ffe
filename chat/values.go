package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// jsonValue decodes one JSON value into a template value, keeping object
// keys in the order they were written (Python's json.loads does, and
// tojson prints them back in that order) and integers apart from floats.
func jsonValue(raw json.RawMessage) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err == nil {
		return jinja.Undefined(), fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			if i, err := t.Int64(); err == nil {
				return jinja.NewInt(i), nil
			}
		}
		f, err := t.Float64()
		return jinja.NewFloat(f), err
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

// messageValues converts msgs into the list the template sees as messages.
// Each message is a fresh dict so that a template that mutates one cannot
// affect another render. Keys appear in a fixed order (role, content,
// reasoning_content, tool_calls, tool_call_id, name), the optional ones only when set.
func messageValues(msgs []Message) (jinja.Value, error) {
	items := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		dict := d.AsDict()
		dict.Set("role", jinja.NewString(m.Role))
		if m.NoContent && m.Content == "" {
			dict.Set("content", jinja.None())
		} else {
			dict.Set("content", jinja.NewString(m.Content))
		}
		if m.ReasoningContent != "" {
			dict.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				args, err := jsonValue(c.Arguments)
				if err != nil || !args.IsDict() {
					return jinja.Undefined(), fmt.Errorf("chat: message %d: tool call %d: %w", i, j, ErrBadArguments)
				}
				fn := jinja.NewDict()
				fn.AsDict().Set("name", jinja.NewString(c.Name))
				fn.AsDict().Set("arguments", args)
				call := jinja.NewDict()
				call.AsDict().Set("id", jinja.NewString(c.ID))
				call.AsDict().Set("type", jinja.NewString("function"))
				call.AsDict().Set("function", fn)
				calls[j] = call
			}
			dict.Set("tool_calls", jinja.NewList(calls))
		}
		if m.ToolCallID != "" {
			dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
		}
		if m.Name != "" {
			dict.Set("name", jinja.NewString(m.Name))
		}
		items[i] = d
	}
	return jinja.NewList(items), nil
}
