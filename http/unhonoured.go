package http

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

// unhonoured is one such field as a request sent it: its name, its raw
// value, which values ask for nothing (nil: only absence or null), and why
// the server cannot honour the rest.
type unhonoured struct {
	name    string
	raw     json.RawMessage
	neutral func(raw []byte) bool
	why     string
}

// refuseUnhonoured answers the first field that asks for what the server
// cannot do with a 400 naming it; each API renders it in its own shape
// (OpenAI: invalid_request_error with param and code unsupported_parameter).
func refuseUnhonoured(fields ...unhonoured) error {
	for _, f := range fields {
		raw := bytes.TrimSpace(f.raw)
		if len(raw) == 0 || string(raw) == "null" || f.neutral != nil && f.neutral(raw) {
			continue
		}
		return notSupported(f.name, f.why)
	}
	return nil
}

// notSupported is the refusal of a field the server does not honour.
func notSupported(field, why string) *apiError {
	e := badParam(field, "%s is not supported: %s", field, why)
	e.Code = "unsupported_parameter"
	return e
}

// The neutral values.

// emptyValue: [], {} or "".
func emptyValue(raw []byte) bool {
	s := string(raw)
	return s == `""` || compactEqual(raw, "[]") || compactEqual(raw, "{}")
}

// numberIs accepts the number x (a default that turns a sampler off).
func numberIs(x float64) func([]byte) bool {
	return func(raw []byte) bool {
		f, ok := optionNumber(raw)
		return ok && f == x
	}
}

// numberAtMost accepts numbers up to x.
func numberAtMost(x float64) func([]byte) bool {
	return func(raw []byte) bool {
		f, ok := optionNumber(raw)
		return ok && f <= x
	}
}

func isFalse(raw []byte) bool { return string(raw) == "false" }

func isBool(raw []byte) bool { return string(raw) == "true" || string(raw) == "false" }

// stringIn accepts one of the strings.
func stringIn(names ...string) func([]byte) bool {
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

// typeIn accepts an object whose "type" is one of names and that says
// nothing else ({"type": "text"}, {"type": "auto"}).
func typeIn(names ...string) func([]byte) bool {
	return func(raw []byte) bool {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || len(obj) != 1 {
			return false
		}
		t, ok := obj["type"]
		return ok && stringIn(names...)(t)
	}
}

// textOnly accepts a modalities list that asks for text alone.
func textOnly(raw []byte) bool {
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

func anyOf(preds ...func([]byte) bool) func([]byte) bool {
	return func(raw []byte) bool {
		for _, p := range preds {
			if p(raw) {
				return true
			}
		}
		return false
	}
}

func compactEqual(raw []byte, want string) bool {
	var b bytes.Buffer
	return json.Compact(&b, raw) == nil && b.String() == want
}

// Why the server cannot honour them.
const (
	whyTools     = "this server does not call tools"
	whySampler   = "this server's sampler chain is penalties, top_k, top_p, min_p and temperature"
	whyModality  = "this server runs text models and answers in text only"
	whyReasoning = "this server does not control the model's reasoning"
)

// llamaUnhonoured are llama.cpp's request fields beyond what the engine
// does: llama-server takes them on /completion, /infill and its
// OpenAI-compatible endpoints, so the same set is checked on all of them.
// The neutral values are llama.cpp's defaults (common/common.h), which
// turn each sampler off; the fields that only tune a sampler that is off
// (xtc_threshold, dry_base, mirostat_tau …) may then be anything.
type llamaUnhonoured struct {
	Mirostat          json.RawMessage `json:"mirostat"`
	TypicalP          json.RawMessage `json:"typical_p"`
	DynatempRange     json.RawMessage `json:"dynatemp_range"`
	XTCProbability    json.RawMessage `json:"xtc_probability"`
	DryMultiplier     json.RawMessage `json:"dry_multiplier"`
	TopNSigma         json.RawMessage `json:"top_n_sigma"`
	MinKeep           json.RawMessage `json:"min_keep"`
	PostSamplingProbs json.RawMessage `json:"post_sampling_probs"`
	NCmpl             json.RawMessage `json:"n_cmpl"`
	Lora              json.RawMessage `json:"lora"`
	MultimodalData    json.RawMessage `json:"multimodal_data"`
	ImageData         json.RawMessage `json:"image_data"`
}

func (u *llamaUnhonoured) check() error {
	return refuseUnhonoured(
		unhonoured{"mirostat", u.Mirostat, numberIs(0), whySampler},
		unhonoured{"typical_p", u.TypicalP, numberIs(1), whySampler},
		unhonoured{"dynatemp_range", u.DynatempRange, numberIs(0), whySampler},
		unhonoured{"xtc_probability", u.XTCProbability, numberIs(0), whySampler},
		unhonoured{"dry_multiplier", u.DryMultiplier, numberIs(0), whySampler},
		unhonoured{"top_n_sigma", u.TopNSigma, numberAtMost(0), whySampler},
		// top_p and min_p always keep at least one token; 0 and 1 say no more.
		unhonoured{"min_keep", u.MinKeep, anyOf(numberIs(0), numberIs(1)), whySampler},
		unhonoured{"post_sampling_probs", u.PostSamplingProbs, isFalse, "probabilities are reported as logprobs before sampling"},
		unhonoured{"n_cmpl", u.NCmpl, numberIs(1), "one completion per prompt is generated (OpenAI's endpoints take n)"},
		unhonoured{"lora", u.Lora, emptyValue, "this server loads no LoRA adapters"},
		unhonoured{"multimodal_data", u.MultimodalData, emptyValue, whyModality},
		unhonoured{"image_data", u.ImageData, emptyValue, whyModality},
	)
}

// oaiChatUnhonoured are the chat-completions fields beyond text generation.
type oaiChatUnhonoured struct {
	Audio            json.RawMessage `json:"audio"`
	Modalities       json.RawMessage `json:"modalities"`
	Verbosity        json.RawMessage `json:"verbosity"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
}

func (u *oaiChatUnhonoured) check() error {
	return refuseUnhonoured(
		unhonoured{"audio", u.Audio, nil, whyModality},
		unhonoured{"modalities", u.Modalities, textOnly, whyModality},
		unhonoured{"verbosity", u.Verbosity, nil, "this server does not steer the length of replies"},
		unhonoured{"web_search_options", u.WebSearchOptions, nil, "this server does not search the web"},
	)
}

// oaiUnhonoured is what a chat request may send that the server does not
// honour: OpenAI's own fields and llama.cpp's extensions.
type oaiUnhonoured struct {
	oaiChatUnhonoured
	llamaUnhonoured
}

func (u *oaiUnhonoured) check() error {
	if err := u.oaiChatUnhonoured.check(); err != nil {
		return err
	}
	return u.llamaUnhonoured.check()
}
