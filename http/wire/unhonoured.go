package wire

import (
	"bytes"
	"encoding/json"
)

// Fields the server does not honour yet, though they change what the reply
// must be (tools, other samplers …), are refused by name rather
// than dropped: a client that sends one believes it was obeyed. A value
// that asks for nothing — the field's default, an empty list — is accepted,
// since clients send those by habit. Fields that do not change the reply
// (metadata, user, service tiers, cache hints, latency-only predictions)
// are left to encoding/json to ignore, as the APIs' own servers ignore
// what they do not know.

// Unhonoured is one such field as a request sent it: its name, its raw
// value, which values ask for nothing (nil: only absence or null), and why
// the server cannot honour the rest.
type Unhonoured struct {
	Name    string
	Raw     json.RawMessage
	Neutral func(raw []byte) bool
	Why     string
}

// RefuseUnhonoured answers the first field that asks for what the server
// cannot do with a 400 naming it; each API renders it in its own shape
// (OpenAI: invalid_request_error with param and code unsupported_parameter).
func RefuseUnhonoured(fields ...Unhonoured) error {
	for _, f := range fields {
		raw := bytes.TrimSpace(f.Raw)
		if len(raw) == 0 || string(raw) == "null" || f.Neutral != nil && f.Neutral(raw) {
			continue
		}
		return NotSupported(f.Name, f.Why)
	}
	return nil
}

// NotSupported is the refusal of a field the server does not honour.
func NotSupported(field, why string) *Error {
	e := BadParam(field, "%s is not supported: %s", field, why)
	e.Code = "unsupported_parameter"
	return e
}

// The neutral values.

// EmptyValue accepts [], {} or "".
func EmptyValue(raw []byte) bool {
	s := string(raw)
	return s == `""` || CompactEqual(raw, "[]") || CompactEqual(raw, "{}")
}

// NumberIs accepts the number x (a default that turns a sampler off).
func NumberIs(x float64) func([]byte) bool {
	return func(raw []byte) bool {
		f, ok := Number(raw)
		return ok && f == x
	}
}

// NumberAtMost accepts numbers up to x.
func NumberAtMost(x float64) func([]byte) bool {
	return func(raw []byte) bool {
		f, ok := Number(raw)
		return ok && f <= x
	}
}

// IsFalse accepts false.
func IsFalse(raw []byte) bool { return string(raw) == "false" }

// IsBool accepts true and false.
func IsBool(raw []byte) bool { return string(raw) == "true" || string(raw) == "false" }

// StringIn accepts one of the strings.
func StringIn(names ...string) func([]byte) bool {
	return func(raw []byte) bool {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return false
		}
		for _, n := range names {
			if s == n {
				return true
			}
		}
		return false
	}
}

// TypeIn accepts an object whose "type" is one of names and that says
// nothing else ({"type": "text"}, {"type": "auto"}).
func TypeIn(names ...string) func([]byte) bool {
	return func(raw []byte) bool {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || len(obj) != 1 {
			return false
		}
		t, ok := obj["type"]
		return ok && StringIn(names...)(t)
	}
}

// TextOnly accepts a modalities list that asks for text alone.
func TextOnly(raw []byte) bool {
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return false
	}
	for _, m := range list {
		if m != "text" {
			return false
		}
	}
	return true
}

// AnyOf accepts what any of preds accepts.
func AnyOf(preds ...func([]byte) bool) func([]byte) bool {
	return func(raw []byte) bool {
		for _, p := range preds {
			if p(raw) {
				return true
			}
		}
		return false
	}
}

// CompactEqual says whether raw, compacted, is want.
func CompactEqual(raw []byte, want string) bool {
	var b bytes.Buffer
	return json.Compact(&b, raw) == nil && b.String() == want
}

// Why the server cannot honour them.
const (
	WhyTools     = "this server does not call tools"
	WhySampler   = "this server's sampler chain is penalties, top_k, top_p, min_p and temperature"
	WhyModality  = "this server runs text models and answers in text only"
	WhyReasoning = "this server does not control the model's reasoning"
	// llama-server takes images only inside a prompt object; its older
	// image_data ([img-N] markers) it dropped with the move to mtmd.
	WhyTopLevelMedia = `images go inside the prompt object, as llama-server takes them: "prompt": {"prompt_string": "… <__media__> …", "multimodal_data": ["<base64>"]} (on /completion)`
	WhyImageData     = `image_data is llama-server's former image field ([img-N] markers), which it no longer takes: send "prompt": {"prompt_string": "… <__media__> …", "multimodal_data": ["<base64>"]} (on /completion)`
)

// LlamaUnhonoured are llama.cpp's request fields beyond what the engine
// does: llama-server takes them on /completion, /infill and its
// OpenAI-compatible endpoints, so the same set is checked on all of them.
// The neutral values are llama.cpp's defaults (common/common.h), which
// turn each sampler off; the fields that only tune a sampler that is off
// (xtc_threshold, dry_base, mirostat_tau …) may then be anything.
type LlamaUnhonoured struct {
	Mirostat          json.RawMessage `json:"mirostat"`
	TypicalP          json.RawMessage `json:"typical_p"`
	DynatempRange     json.RawMessage `json:"dynatemp_range"`
	XTCProbability    json.RawMessage `json:"xtc_probability"`
	DryMultiplier     json.RawMessage `json:"dry_multiplier"`
	TopNSigma         json.RawMessage `json:"top_n_sigma"`
	MinKeep           json.RawMessage `json:"min_keep"`
	PostSamplingProbs json.RawMessage `json:"post_sampling_probs"`
	NCmpl             json.RawMessage `json:"n_cmpl"`
	// lora rides along with these, since the same requests carry it, but
	// is honoured: Spec.LoRA comes from LoRAField.Scales.
	LoRAField
	MultimodalData json.RawMessage `json:"multimodal_data"`
	ImageData      json.RawMessage `json:"image_data"`
}

func (u *LlamaUnhonoured) Check() error {
	return RefuseUnhonoured(
		Unhonoured{"mirostat", u.Mirostat, NumberIs(0), WhySampler},
		Unhonoured{"typical_p", u.TypicalP, NumberIs(1), WhySampler},
		Unhonoured{"dynatemp_range", u.DynatempRange, NumberIs(0), WhySampler},
		Unhonoured{"xtc_probability", u.XTCProbability, NumberIs(0), WhySampler},
		Unhonoured{"dry_multiplier", u.DryMultiplier, NumberIs(0), WhySampler},
		Unhonoured{"top_n_sigma", u.TopNSigma, NumberAtMost(0), WhySampler},
		// top_p and min_p always keep at least one token; 0 and 1 say no more.
		Unhonoured{"min_keep", u.MinKeep, AnyOf(NumberIs(0), NumberIs(1)), WhySampler},
		Unhonoured{"post_sampling_probs", u.PostSamplingProbs, IsFalse, "probabilities are reported as logprobs before sampling"},
		Unhonoured{"n_cmpl", u.NCmpl, NumberIs(1), "one completion per prompt is generated (OpenAI's endpoints take n)"},
		Unhonoured{"multimodal_data", u.MultimodalData, EmptyValue, WhyTopLevelMedia},
		Unhonoured{"image_data", u.ImageData, EmptyValue, WhyImageData},
	)
}

// UnhonouredField is the field name as a request sent it (raw), with the
// values that ask for nothing (neutral) and why the rest is refused.
func UnhonouredField(name string, raw json.RawMessage, neutral func([]byte) bool, why string) Unhonoured {
	return Unhonoured{Name: name, Raw: raw, Neutral: neutral, Why: why}
}
