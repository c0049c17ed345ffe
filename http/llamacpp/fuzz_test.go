package llamacpp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// Fuzz targets for the /completion and /infill request decoders: any body
// goes through decode, checks and prompt building over the fake
// vocabulary without a panic, and what is accepted is consistent (prompts
// fit the context, token ids are in the vocabulary). Run each with
// go test -fuzz=Name -fuzztime=30s ./http/llamacpp/.

var llamaSeeds = []string{
	`{"prompt":"Hello","n_predict":8,"temperature":0}`,
	`{"prompt":[1,2,"x",3],"n_predict":-1,"stream":true,"n_probs":2,"return_tokens":true}`,
	`{"prompt":["a",[1,2],[3,"b"]],"stop":["\n"],"logit_bias":[[65,false],["ab",-1]],"samplers":["top_k","infill"]}`,
	`{"prompt":"x","logit_bias":{"65":1,"z":false},"seed":-1,"repeat_last_n":-1,"ignore_eos":true,"samplers":"kfypmxt"}`,
	`{"input_prefix":"def f():\n    ","input_suffix":"\n","input_extra":[{"filename":"a.py","text":"x = 1\n","time":[1,2]}],"prompt":"re","n_indent":4,"t_max_prompt_ms":500,"t_max_predict_ms":250,"response_fields":["content","timings/prompt_n"]}`,
	`{"input_prefix":"","input_suffix":"","input_extra":[],"prompt":"","n_predict":0,"temperature":0.0,"stream":false,"samplers":[],"cache_prompt":true,"t_max_prompt_ms":1,"t_max_predict_ms":1,"response_fields":[""]}`,
	`{"prompt":"` + strings.Repeat("long ", 200) + `"}`,
	`{"prompt":null}`, `[]`, `{"n_predict":"ten"}`, "{\"prompt\":\"\xff\"}",
	// Poison values: each is normalized or refused before the scheduler.
	`{"prompt":"x","temperature":1e-40,"top_p":1e-50,"min_p":1e-300,"repeat_penalty":1e-40}`,
	`{"prompt":"x","temperature":1e400,"top_k":1e30,"seed":1e30,"n_predict":1e30,"n_probs":1e30}`,
	`{"prompt":"x","repeat_last_n":2000000000,"repeat_penalty":1.1,"t_max_predict_ms":1e30,"n_indent":1e30}`,
	`{"prompt":"x","temperature":1,"logit_bias":` + tasktest.BanAllPairs(tasktest.FakeVocab) + `}`,
	`{"prompt":"x","temperature":1,"ignore_eos":true,"logit_bias":` + tasktest.BanAllObject(tasktest.FakeVocab, "false", tasktest.FakeEOS) + `}`,
	`{"prompt":"x","logit_bias":[[65,1e400],[1e30,1]]}`,
	`{"prompt":"x","grammar":"root ::= x","json_schema":{},"response_format":{"type":"json_object"},"mirostat":2,"dry_multiplier":0.8}`,
	`{"prompt":"x","grammar":"","mirostat":0,"typical_p":1,"xtc_probability":0,"top_n_sigma":-1,"min_keep":0}`,
	`{"prompt":"` + strings.Repeat("x", 16*512+1) + `"}`,
	`{"input_prefix":"` + strings.Repeat("p", 40000) + `","input_suffix":"` + strings.Repeat("s", 40000) + `","input_extra":[{"filename":"a","text":"` + strings.Repeat("e", 40000) + `"}]}`,
}

func FuzzLlamaCompletionRequest(f *testing.F) {
	for _, s := range llamaSeeds {
		f.Add([]byte(s))
	}
	m := tasktest.FakeModel(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req completionRequest
		if decodeBody(body, &req) != nil {
			return
		}
		jobs, p, err := completionJobs(m, &req, sched.Chat)
		if err != nil {
			wire.AsError(err) // every refusal has a status
			return
		}
		for _, j := range jobs {
			tasktest.CheckAccepted(t, m, j.spec)
			r := &completionRun{job: j, p: p, content: []byte("out"), stopType: "eos"}
			res := r.response(m, p.stream)
			if _, err := res.marshal(p.fields); err != nil {
				t.Fatalf("cannot encode a result: %v", err)
			}
		}
	})
}

func FuzzLlamaInfillRequest(f *testing.F) {
	for _, s := range llamaSeeds {
		f.Add([]byte(s), true)
	}
	models := map[bool]*task.Model{true: tasktest.FakeModel(f, true), false: tasktest.FakeModel(f, false)}
	f.Fuzz(func(t *testing.T, body []byte, capable bool) {
		m := models[capable]
		var req completionRequest
		if decodeBody(body, &req) != nil {
			return
		}
		j, _, err := infillJob(m, &req)
		if err != nil {
			if e := wire.AsError(err); !capable && e.Status != 501 && e.Status != 400 && e.Status != 404 {
				t.Fatalf("status %d for a model that cannot FIM", e.Status)
			}
			return
		}
		if !capable {
			t.Fatal("a model without FIM tokens built an infill prompt")
		}
		tasktest.CheckAccepted(t, m, j.spec)
		if j.spec.Class != sched.FIM || len(j.spec.StopTokens) == 0 {
			t.Fatalf("infill job %+v", j.spec)
		}
	})
}

// The line rules only ever cut: what they keep is a prefix of the text,
// however it is split, and an n_indent stop is at an under-indented line.
func FuzzLineGuard(f *testing.F) {
	f.Add([]byte("x = 1\n    y\nz\n"), 4, 3, false)
	f.Add([]byte("a\n\n\tb"), 1, 1, true)
	f.Fuzz(func(t *testing.T, text []byte, nIndent, size int, overtime bool) {
		if size <= 0 || size > 64 {
			size = 7
		}
		g := lineGuard{nIndent: nIndent % 64}
		var kept []byte
		stop := ""
		for i := 0; i < len(text) && stop == ""; i += size {
			var k []byte
			k, stop = g.push(text[i:min(i+size, len(text))], overtime)
			kept = append(kept, k...)
		}
		if !bytes.HasPrefix(text, kept) {
			t.Fatalf("kept %q is not a prefix of %q", kept, text)
		}
		if stop == guardIndent {
			line := kept[bytes.LastIndexByte(kept, '\n')+1:]
			if len(bytes.TrimLeft(line, " \t")) != 0 || len(line) >= g.nIndent || bytes.IndexByte(kept, '\n') < 0 {
				t.Fatalf("n_indent %d stopped after %q", g.nIndent, kept)
			}
		}
	})
}

func FuzzSelectFields(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1},"c":[1]}`), "a/b\x00c\x00a/x\x00\x00c/0")
	f.Fuzz(func(t *testing.T, doc []byte, paths string) {
		b, err := selectFields(doc, strings.Split(paths, "\x00"))
		if err == nil && !json.Valid(b) {
			t.Fatalf("invalid JSON %q", b)
		}
	})
}
