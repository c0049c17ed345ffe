package http

import (
	"encoding/json"
	"math"
	"strconv"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// parseLlamaBias reads llama.cpp's logit_bias: an array of [token, bias]
// pairs or an object {token: bias}, where a token is an id or a text whose
// every token gets the bias, and a bias is a number in [-100, 100] or false
// (the token is never produced).
func parseLlamaBias(m *Model, raw json.RawMessage) ([]engine.LogitBias, error) {
	v, err := wire.DecodeAny(raw)
	if err != nil {
		return nil, wire.BadParam("logit_bias", "logit_bias: %v", err)
	}
	var out []engine.LogitBias
	add := func(key, val any) error {
		bias, err := biasValue(val)
		if err != nil {
			return err
		}
		ids, err := biasTokens(m, key)
		if err != nil {
			return err
		}
		for _, id := range ids {
			out = append(out, engine.LogitBias{Token: id, Bias: bias})
		}
		if len(out) > task.MaxBiasEntries {
			return wire.BadParam("logit_bias", "logit_bias names more than %d tokens", task.MaxBiasEntries)
		}
		return nil
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		for _, e := range x {
			pair, ok := e.([]any)
			if !ok || len(pair) != 2 {
				return nil, wire.BadParam("logit_bias", "logit_bias entries must be [token, bias] pairs")
			}
			if err := add(pair[0], pair[1]); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k, val := range x {
			var key any = k
			if _, err := strconv.Atoi(k); err == nil {
				key = json.Number(k)
			}
			if err := add(key, val); err != nil {
				return nil, err
			}
		}
	default:
		return nil, wire.BadParam("logit_bias", "logit_bias must be an array of [token, bias] pairs or an object")
	}
	return out, nil
}

// biasValue reads a bias: a number in [-100, 100], or false for -Inf.
func biasValue(v any) (float32, error) {
	switch x := v.(type) {
	case bool:
		if !x {
			return float32(math.Inf(-1)), nil
		}
	case json.Number:
		f, err := x.Float64()
		if err == nil && f >= -100 && f <= 100 {
			return float32(f), nil
		}
	}
	return 0, wire.BadParam("logit_bias", "a logit_bias value must be a number in [-100, 100] or false")
}

// biasTokens reads a bias key: a token id, or text to tokenize.
func biasTokens(m *Model, key any) ([]engine.Token, error) {
	switch x := key.(type) {
	case json.Number:
		id, err := x.Int64()
		if err != nil || id < 0 || id >= int64(m.Desc.Vocab) {
			return nil, wire.BadParam("logit_bias", "logit_bias: %s is not a token id of this model", x)
		}
		return []engine.Token{engine.Token(id)}, nil
	case string:
		toks, err := m.Text.Tokenize(x, false, false)
		if err != nil {
			return nil, wire.BadParam("logit_bias", "logit_bias: cannot tokenize %q: %v", x, err)
		}
		return toks, nil
	}
	return nil, wire.BadParam("logit_bias", "a logit_bias token must be an id or a string")
}

// biasSettings renders biases for generation_settings, false standing for
// a bias JSON cannot carry (-Inf), as llama.cpp's requests write it.
func biasSettings(bias []engine.LogitBias) [][2]any {
	out := make([][2]any, 0, len(bias))
	for _, b := range bias {
		var v any = b.Bias
		if math.IsInf(float64(b.Bias), 0) {
			v = false
		}
		out = append(out, [2]any{b.Token, v})
	}
	return out
}

// checkSamplers accepts llama.cpp's samplers: an array of names or a
// string of sampler letters. The engine's chain is fixed (see
// llamacpp.SamplerChain), so only the type is checked.
func checkSamplers(raw json.RawMessage) error {
	v, err := wire.DecodeAny(raw)
	if err != nil {
		return wire.BadParam("samplers", "samplers: %v", err)
	}
	switch x := v.(type) {
	case nil, string:
		return nil
	case []any:
		for _, e := range x {
			if _, ok := e.(string); !ok {
				return wire.BadParam("samplers", "samplers must be an array of sampler names")
			}
		}
		return nil
	}
	return wire.BadParam("samplers", "samplers must be an array of sampler names or a string")
}
