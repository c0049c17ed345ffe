package wire

import (
	"bytes"
	"encoding/json"
	"math"

	"superfluid/task"
)

// maxLoRAEntries bounds a lora list: far more than any model loads
// adapters, so a longer list is only ever hostile.
const maxLoRAEntries = 256

// LoRAField is llama.cpp's per-request "lora": [{"id": n, "scale": s}],
// which llama-server takes on /completion, /infill and its OpenAI
// endpoints.
type LoRAField struct {
	Lora json.RawMessage `json:"lora"`
}

// Scales is the adapter scales the request runs under (task.Adapters.
// ForRequest): absent or null, the model's global ones.
func (f *LoRAField) Scales(m *task.Model) ([]float32, error) {
	entries, err := ParseLoRAEntries(f.Lora, "lora")
	if err != nil {
		return nil, err
	}
	s, err := m.LoRA.ForRequest(entries, "lora")
	return s, Convert(err)
}

// ParseLoRAEntries reads a list of {"id", "scale"} objects (a request's
// lora field, or the body of POST /lora-adapters); nil when raw is absent
// or null. An id must be an integer; a scale a number (0 when left out,
// as llama-server reads it).
func ParseLoRAEntries(raw json.RawMessage, field string) ([]task.LoRAEntry, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '[' {
		return nil, BadParam(field, `%s must be an array of {"id", "scale"} objects, got %s`, field, jsonKind(raw))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, BadParam(field, "%s: %v", field, err)
	}
	if len(elems) > maxLoRAEntries {
		return nil, BadParam(field, "%s has %d entries; at most %d are read", field, len(elems), maxLoRAEntries)
	}
	out := make([]task.LoRAEntry, 0, len(elems))
	for i, e := range elems {
		var obj struct {
			ID    json.RawMessage `json:"id"`
			Scale json.RawMessage `json:"scale"`
		}
		if e = bytes.TrimSpace(e); len(e) == 0 || e[0] != '{' || json.Unmarshal(e, &obj) != nil {
			return nil, BadParam(field, `%s[%d] must be an object {"id", "scale"}, got %s`, field, i, jsonKind(e))
		}
		id, ok := Number(obj.ID)
		if !ok || id != math.Trunc(id) || math.Abs(id) > 1<<31 {
			return nil, BadParam(field, "%s[%d].id must be an adapter's integer id, got %s", field, i, orNothing(obj.ID))
		}
		entry := task.LoRAEntry{ID: int64(id)}
		if s := bytes.TrimSpace(obj.Scale); len(s) > 0 && string(s) != "null" {
			if entry.Scale, ok = Number(s); !ok || !Finite(entry.Scale) {
				return nil, BadParam(field, "%s[%d].scale must be a finite number, got %s", field, i, s)
			}
		}
		out = append(out, entry)
	}
	return out, nil
}

func orNothing(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "nothing"
	}
	return string(raw)
}
