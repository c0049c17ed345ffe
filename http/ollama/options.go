package ollama

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"sort"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// options are the fields of Ollama's "options" that change what is
// generated. Absent fields are nil: Ollama's defaults apply (see sampling).
type options struct {
	NumPredict, TopK, RepeatLastN, NumCtx *int
	Seed                                  *int64
	Temperature, TopP, MinP               *float64
	RepeatPenalty, PresencePenalty        *float64
	FrequencyPenalty, TypicalP            *float64
	Stop                                  []string
}

type optionKind uint8

const (
	optInt optionKind = iota
	optFloat
	optBool
	optStrings
)

// optionKinds lists every option api.Options (v0.24.0) knows, with
// its JSON type. The ones options has no field for (num_keep,
// num_batch, num_gpu, main_gpu, use_mmap, num_thread) are type-checked as
// Ollama does and then ignored: none changes the reply (batch, threads and
// GPU layers are fixed when the server starts and shared by every request;
// num_keep matters only to a context shift, which never happens here).
// typical_p is refused unless 1, its default (the engine has no typical
// sampler).
// Options Ollama does not know are ignored, as Ollama ignores them.
var optionKinds = map[string]optionKind{
	"num_predict": optInt, "top_k": optInt, "repeat_last_n": optInt, "num_ctx": optInt, "seed": optInt,
	"temperature": optFloat, "top_p": optFloat, "min_p": optFloat, "repeat_penalty": optFloat,
	"presence_penalty": optFloat, "frequency_penalty": optFloat, "stop": optStrings,
	"num_keep": optInt, "typical_p": optFloat, "num_batch": optInt, "num_gpu": optInt,
	"main_gpu": optInt, "use_mmap": optBool, "num_thread": optInt,
}

// parseOptions reads "options" with Ollama's typing rules
// (api.Options.FromMap): integers accept any JSON number and drop the
// fraction, floats any number, stop an array of strings; null leaves an
// option at its default; a value of the wrong type is a 400.
func parseOptions(raw map[string]json.RawMessage) (options, error) {
	var o options
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad option reported is the same every time
	for _, key := range keys {
		val := bytes.TrimSpace(raw[key])
		kind, known := optionKinds[key]
		if !known {
			slog.Debug("ollama: ignoring unknown option", "option", key)
			continue
		}
		if len(val) == 0 || string(val) == "null" {
			continue
		}
		if err := o.set(key, kind, val); err != nil {
			return o, err
		}
	}
	return o, nil
}

func (o *options) set(key string, kind optionKind, val []byte) error {
	switch kind {
	case optInt:
		n, err := optionInt(key, val)
		if err != nil {
			return err
		}
		o.setInt(key, n)
	case optFloat:
		f, ok := optionNumber(val)
		if !ok {
			return wire.BadParam("options", "option %q must be of type float32", key)
		}
		o.setFloat(key, f)
	case optBool:
		if string(val) != "true" && string(val) != "false" {
			return wire.BadParam("options", "option %q must be of type boolean", key)
		}
	case optStrings:
		if val[0] != '[' {
			return wire.BadParam("options", "option %q must be of type array", key)
		}
		var stops []string
		if err := json.Unmarshal(val, &stops); err != nil {
			return wire.BadParam("options", "option %q must be of an array of strings", key)
		}
		if err := task.CheckStops("options."+key, stops, task.MaxStops); err != nil {
			return err
		}
		o.Stop = stops
	}
	return nil
}

// optionNumber reads a JSON number (and nothing else: a numeric string is
// not one, as in Ollama).
func optionNumber(val []byte) (float64, bool) { return wire.Number(val) }

// optionInt reads an integer option; a fractional value is truncated as
// Ollama truncates it, and one no int64 can hold is refused.
func optionInt(key string, val []byte) (int64, error) {
	var n json.Number
	if _, ok := optionNumber(val); !ok || json.Unmarshal(val, &n) != nil {
		return 0, wire.BadParam("options", "option %q must be of type integer", key)
	}
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil || math.Abs(f) >= 1<<62 {
		return 0, wire.BadParam("options", "option %q is out of range", key)
	}
	return int64(f), nil
}

func (o *options) setInt(key string, n int64) {
	// Every int option but seed is a count: clamp it into int range so that
	// a huge value is refused or capped by the checks that follow rather
	// than wrapping around.
	c := int(max(min(n, math.MaxInt32), math.MinInt32))
	switch key {
	case "num_predict":
		o.NumPredict = &c
	case "top_k":
		o.TopK = &c
	case "repeat_last_n":
		o.RepeatLastN = &c
	case "num_ctx":
		o.NumCtx = &c
	case "seed":
		o.Seed = &n
	}
}

func (o *options) setFloat(key string, f float64) {
	switch key {
	case "temperature":
		o.Temperature = &f
	case "top_p":
		o.TopP = &f
	case "min_p":
		o.MinP = &f
	case "repeat_penalty":
		o.RepeatPenalty = &f
	case "presence_penalty":
		o.PresencePenalty = &f
	case "frequency_penalty":
		o.FrequencyPenalty = &f
	case "typical_p":
		o.TypicalP = &f
	}
}

// defaultTemperature is Ollama's (api.DefaultOptions) for requests
// that leave temperature out.
const defaultTemperature = 0.8

// sampling turns the options into engine sampling with Ollama's default
// temperature; omitted top_k, top_p and min_p take the model's defaults as
// on every API (llama-server's 40, 0.95 and 0.05 unless the GGUF
// recommends others), not Ollama's 40 and 0.9, so one request samples the
// same way whichever API it comes through. The repetition penalty is
// applied only when a request sets it: Ollama's own engine (ollamarunner,
// which runs the models it ships) ignores penalties, while its legacy
// llama.cpp runner applied 1.1 by default; following the former keeps
// temperature 0 the same greedy text every other API gives. seed -1 is
// Ollama's "random".
func (o *options) sampling(m *task.Model) (engine.Sampling, error) {
	if o.TypicalP != nil && *o.TypicalP != 1 {
		return engine.Sampling{}, wire.NotSupported("typical_p", wire.WhySampler)
	}
	seed := o.Seed
	if seed != nil && *seed == -1 {
		seed = nil
	}
	s, err := task.Sampling(m, task.SamplingFields{Temperature: o.Temperature, DefaultTemperature: defaultTemperature, TopK: o.TopK, TopP: o.TopP, MinP: o.MinP,
		Seed: seed, RepeatPenalty: o.RepeatPenalty, FrequencyPenalty: o.FrequencyPenalty, PresencePenalty: o.PresencePenalty})
	if err != nil {
		return s, err
	}
	s.PenaltyLastN, err = task.PenaltyWindow("repeat_last_n", o.RepeatLastN, s.PenaltyLastN, m.Desc.Ctx)
	return s, err
}

// window is the context a request may use: num_ctx when it is set and
// smaller than the server's context, which is fixed at start-up and shared
// by every lane. A larger num_ctx cannot be granted and is clamped. The
// returned model is m, or a copy whose descriptor reports the smaller
// context, so that prompt checks and FIM truncation fit the window.
func (o *options) window(m *task.Model) *task.Model {
	if o.NumCtx == nil || *o.NumCtx <= 0 || *o.NumCtx >= m.Desc.Ctx {
		return m
	}
	w := *m
	d := *m.Desc
	d.Ctx = *o.NumCtx
	w.Desc = &d
	return &w
}

// maxTokens is num_predict as a generation limit (0: unbounded). Ollama
// treats zero and every negative value (-1 infinite, -2 fill the context)
// as "until the model stops"; generation here also stops when the window
// is full. Within a window smaller than the server's context the limit is
// the room the prompt leaves.
func (o *options) maxTokens(m, windowed *task.Model, promptLen int) int {
	n := 0
	if o.NumPredict != nil && *o.NumPredict > 0 {
		n = min(*o.NumPredict, m.Desc.Ctx)
	}
	if windowed != m {
		room := windowed.Desc.Ctx - promptLen
		if n == 0 || n > room {
			n = room
		}
	}
	return n
}
