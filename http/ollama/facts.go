package ollama

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"superfluid/gguf"
	"superfluid/http/wire"
	"superfluid/task"
)

// facts is what Ollama's listing endpoints say about the model file.
// It is read once per model: a GGUF header with a large vocabulary takes
// tens of milliseconds to parse, and the file does not change under a
// running server.
type facts struct {
	size     int64
	modified time.Time
	details  details
	info     map[string]any // model_info without the vocabulary arrays
}

// factsCache keeps each model's facts for one server (no process
// global). It is keyed by file and identity, not by *task.Model: a model
// unloaded and loaded again is a new *task.Model over the same file.
type factsCache struct {
	m sync.Map // path NUL identity → *facts
}

func (c *factsCache) of(m *task.Model) *facts {
	key := m.Path + "\x00" + m.Desc.Identity
	if f, ok := c.m.Load(key); ok {
		return f.(*facts)
	}
	file, _ := gguf.Open(m.Path) // nil: facts from the descriptor alone
	f := &facts{info: modelInfo(m, file, false)}
	f.size, f.modified = m.FileFacts()
	arch := m.Desc.Architecture
	f.details = details{Format: "gguf", Family: arch, Families: []string{arch},
		ParameterSize: humanNumber(m.Desc.Params), QuantizationLevel: file.QuantizationLevel()}
	actual, _ := c.m.LoadOrStore(key, f)
	return actual.(*facts)
}

// vocabularyKeys are the metadata arrays Ollama's /api/show leaves null
// unless asked to be verbose: they are the whole vocabulary.
var vocabularyKeys = map[string]bool{
	"tokenizer.ggml.tokens": true, "tokenizer.ggml.merges": true,
	"tokenizer.ggml.token_type": true, "tokenizer.ggml.scores": true,
}

// modelInfo is the GGUF metadata as Ollama's model_info reports it, with
// one change: <arch>.context_length is the context this server runs with,
// not the one the model was trained with. Clients (Continue among them)
// size their prompts by that key, and a prompt longer than the served
// context is refused here where Ollama would truncate it.
func modelInfo(m *task.Model, f *gguf.File, verbose bool) map[string]any {
	info := map[string]any{}
	if f != nil {
		for _, kv := range f.KVs {
			if vocabularyKeys[kv.Key] && !verbose {
				info[kv.Key] = nil
				continue
			}
			if v, ok := jsonValue(kv.Value.Any()); ok {
				info[kv.Key] = v
			}
		}
	}
	arch := m.Desc.Architecture
	info["general.architecture"] = arch
	if _, ok := info["general.parameter_count"]; !ok && m.Desc.Params > 0 {
		info["general.parameter_count"] = m.Desc.Params
	}
	info[arch+".context_length"] = m.Desc.Ctx
	return info
}

// jsonValue converts a GGUF metadata value into something encoding/json
// renders as Ollama does: numbers, strings, booleans and arrays of them.
// Non-finite floats (which JSON cannot hold) drop the key.
func jsonValue(v any) (any, bool) {
	switch x := v.(type) {
	case float32: // kept 32-bit: JSON shows 0.000001, not 9.999999974752427e-07
		return x, wire.Finite(float64(x))
	case float64:
		return x, wire.Finite(x)
	case gguf.Array:
		return jsonArray(x.Values)
	}
	return v, true
}

func jsonArray(values any) (any, bool) {
	switch s := values.(type) {
	case []uint8: // would marshal as base64
		out := make([]int, len(s))
		for i, b := range s {
			out[i] = int(b)
		}
		return out, true
	case []float32:
		for _, f := range s {
			if !wire.Finite(float64(f)) {
				return nil, false
			}
		}
	case []float64:
		for _, f := range s {
			if !wire.Finite(f) {
				return nil, false
			}
		}
	case []gguf.Array:
		out := make([]any, len(s))
		for i, a := range s {
			v, ok := jsonArray(a.Values)
			if !ok {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	}
	return values, true
}

// humanNumber spells a parameter count as Ollama does (format.HumanNumber):
// "494.03M", "7.6B", "8B".
func humanNumber(n uint64) string {
	f := float64(n)
	switch {
	case n >= 1e9:
		if f/1e9 == math.Floor(f/1e9) {
			return fmt.Sprintf("%.0fB", f/1e9)
		}
		return fmt.Sprintf("%.1fB", f/1e9)
	case n >= 1e6:
		if f/1e6 == math.Floor(f/1e6) {
			return fmt.Sprintf("%.0fM", f/1e6)
		}
		return fmt.Sprintf("%.2fM", f/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", f/1e3)
	}
	return strconv.FormatUint(n, 10)
}

// parameters are the sampling defaults this server applies to
// Ollama requests, and the context it runs with, as Modelfile parameters.
func parameters(m *task.Model) []string {
	d := m.Defaults()
	return []string{
		fmt.Sprintf("%-30s %d", "num_ctx", m.Desc.Ctx),
		fmt.Sprintf("%-30s %g", "temperature", defaultTemperature),
		fmt.Sprintf("%-30s %d", "top_k", d.TopK),
		fmt.Sprintf("%-30s %g", "top_p", d.TopP),
		fmt.Sprintf("%-30s %g", "min_p", d.MinP),
	}
}

// writeAdapters lists the LoRA adapters an Ollama request runs under (the
// global scales: Ollama requests name none) as Modelfile ADAPTER lines.
// Ollama applies an adapter at scale 1; another scale is said in a comment
// before its line.
func writeAdapters(b *strings.Builder, m *task.Model) {
	if m.LoRA == nil {
		return
	}
	for _, a := range m.LoRA.List() {
		if a.Scale == 0 {
			continue
		}
		if a.Scale != 1 {
			fmt.Fprintf(b, "# LoRA adapter %d at scale %g (GET /lora-adapters)\n", a.ID, a.Scale)
		}
		fmt.Fprintf(b, "ADAPTER %s\n", a.Path)
	}
}

func modelfile(m *task.Model, tmpl string, params []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Modelfile generated by \"ollama show\"\n# To build a new Modelfile based on this, replace FROM with:\n# FROM %s\n\n", taggedName(m.Name))
	fmt.Fprintf(&b, "FROM %s\n", m.Path)
	writeAdapters(&b, m)
	fmt.Fprintf(&b, "TEMPLATE \"\"\"%s\"\"\"\n", tmpl)
	for _, p := range params {
		fields := strings.Fields(p)
		fmt.Fprintf(&b, "PARAMETER %s\n", strings.Join(fields, " "))
	}
	return b.String()
}
