package llamacpp

import (
	"bytes"
	"encoding/json"
	"strings"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// response renders a finished run as llama.cpp's final result. In a stream
// the content and tokens went out in the partial events, so the last one
// carries neither (as llama.cpp does).
func (r *completionRun) response(m *task.Model, streamed bool) completionResult {
	res := r.result
	prompt := r.job.spec.Prompt
	out := completionResult{
		Index: r.job.index, Content: string(r.content), Tokens: r.tokens, IDSlot: -1, Stop: true, Model: m.Name,
		TokensPredicted: r.predicted, TokensEvaluated: len(prompt), GenerationSettings: r.p.settings,
		HasNewLine: bytes.IndexByte(r.content, '\n') >= 0, Truncated: r.truncated,
		StopType: r.stopType, StoppingWord: r.stopWord, TokensCached: res.CachedTokens, Probs: r.probs,
	}
	if out.Tokens == nil {
		out.Tokens = []engine.Token{}
	}
	if streamed {
		out.Content, out.Tokens, out.Probs = "", []engine.Token{}, nil
	}
	if wantField(r.p.fields, "prompt") {
		out.Prompt = m.Text.Detokenize(prompt, true)
	}
	out.Timings = r.timings()
	return out
}

// timings reports the work this run did. A run that never started reports
// none; a cached answer reports the whole prompt as cached.
func (r *completionRun) timings() wire.Timings {
	res := r.result
	if r.fromCache {
		return wire.NewTimings(res.CachedTokens, 0, 0, 0, 0)
	}
	promptN := 0
	if res.Prefill > 0 || r.predicted > 0 {
		promptN = max(len(r.job.spec.Prompt)-res.CachedTokens, 0)
	}
	predictedMS := wire.Milliseconds(res.Decode)
	if r.p.warmup {
		predictedMS = 0
	}
	t := wire.NewTimings(res.CachedTokens, promptN, wire.Milliseconds(res.Prefill), r.predicted, predictedMS)
	if res.DraftTokens > 0 {
		accepted := res.DraftAccepted
		t.DraftN, t.DraftNAccepted = res.DraftTokens, &accepted
	}
	return t
}

// marshal renders the result, keeping only the requested fields.
func (res *completionResult) marshal(fields []string) ([]byte, error) {
	b, err := json.Marshal(res)
	if err != nil || fields == nil {
		return b, err
	}
	return selectFields(b, fields)
}

// wantField reports whether a response filtered by fields (nil: all) can
// hold the top-level field name.
func wantField(fields []string, name string) bool {
	if fields == nil {
		return true
	}
	for _, f := range fields {
		if f == name || strings.HasPrefix(f, name+"/") {
			return true
		}
	}
	return false
}

// selectFields keeps the named fields of a JSON object as llama.cpp's
// response_fields does (json_get_nested_values): a path "a/b" takes field b
// of object a and puts it at the top level under the name "a/b"; a path
// that names nothing is left out.
func selectFields(full []byte, paths []string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(full, &top); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(paths))
	for _, path := range paths {
		if v, ok := lookupPath(top, strings.Split(path, "/")); ok {
			out[path] = v
		}
	}
	return json.Marshal(out)
}

// lookupPath walks keys down nested objects.
func lookupPath(obj map[string]json.RawMessage, keys []string) (json.RawMessage, bool) {
	v, ok := obj[keys[0]]
	if !ok {
		return nil, false
	}
	if len(keys) == 1 {
		return v, true
	}
	var next map[string]json.RawMessage
	if json.Unmarshal(v, &next) != nil || next == nil {
		return nil, false
	}
	return lookupPath(next, keys[1:])
}
