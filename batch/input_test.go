package batch

import (
	"errors"
	"strings"
	"testing"
)

func TestReadInputForms(t *testing.T) {
	in := strings.Join([]string{
		`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}}`,
		``,
		`{"prompt":"once upon","max_tokens":3}`,
		`{"custom_id":"m","messages":[{"role":"user","content":"x"}]}`,
		`{"custom_id":"b","url":"/v1/completions","body":{"prompt":"p"}}`,
		`not json`,
		`{"custom_id":"c","method":"GET","url":"/v1/completions","body":{"prompt":"p"}}`,
		`{"custom_id":"d","method":"POST","url":"/v1/embeddings","body":{"input":"p"}}`,
		`{"custom_id":"e","method":"POST","url":"/v1/completions","body":{"prompt":"p","stream":true}}`,
		`{"custom_id":"f","method":"POST","url":"/v1/completions","body":"prompt"}`,
		`{"custom_id":7,"prompt":"x"}`,
		`{"text":"neither prompt nor messages"}`,
		`{"method":"POST","url":"/v1/completions","body":{"prompt":"p"}}`,
		`[1,2]`,
		`{"custom_id":"g","url":"/v1/moderations","body":{"input":"p"}}`,
		`{"custom_id":"h","input":["a","b"]}`,
	}, "\n")
	reqs, err := ReadInput(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		line    int
		id, url string
		invalid string // substring; "" means valid
	}{
		{1, "a", ChatCompletions, ""},
		{3, "line-3", Completions, ""},
		{4, "m", ChatCompletions, ""},
		{5, "b", Completions, ""},
		{6, "line-6", "", "not a JSON object"},
		{7, "c", Completions, `method must be "POST"`},
		{8, "d", Embeddings, ""},
		{9, "e", Completions, "stream is not supported"},
		{10, "f", Completions, "body must be a JSON object"},
		{11, "line-11", "", "custom_id must be a non-empty string"},
		{12, "line-12", "", `"prompt", "messages" or "input"`},
		{13, "line-13", Completions, "custom_id is required"},
		{14, "line-14", "", "not a JSON object"},
		{15, "g", "/v1/moderations", "not supported"},
		{16, "h", Embeddings, ""},
	}
	if len(reqs) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(reqs), len(want), reqs)
	}
	for i, w := range want {
		r := reqs[i]
		if r.Line != w.line || r.CustomID != w.id || (w.invalid == "" && r.URL != w.url) {
			t.Errorf("request %d = line %d id %q url %q; want line %d id %q url %q", i, r.Line, r.CustomID, r.URL, w.line, w.id, w.url)
		}
		if (w.invalid == "") != (r.Invalid == "") || !strings.Contains(r.Invalid, w.invalid) {
			t.Errorf("line %d: invalid %q, want %q", r.Line, r.Invalid, w.invalid)
		}
	}
	if got := string(reqs[1].Body); got != `{"max_tokens":3,"prompt":"once upon"}` {
		t.Errorf("bare body = %s", got)
	}
	if got := string(reqs[2].Body); strings.Contains(got, "custom_id") {
		t.Errorf("bare body keeps custom_id: %s", got)
	}
}

func TestReadInputRefusesDuplicateIDs(t *testing.T) {
	in := `{"custom_id":"x","prompt":"a"}` + "\n" + `{"prompt":"b"}` + "\n" + `{"custom_id":"x","prompt":"c"}` + "\n"
	_, err := ReadInput(strings.NewReader(in))
	if !errors.Is(err, ErrDuplicateID) || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err = %v, want a duplicate custom_id naming lines 3 and 1", err)
	}
}

func TestReadInputLastLineWithoutNewline(t *testing.T) {
	reqs, err := ReadInput(strings.NewReader(`{"prompt":"a"}` + "\n" + `{"prompt":"b"}`))
	if err != nil || len(reqs) != 2 || reqs[1].CustomID != "line-2" || reqs[1].Invalid != "" {
		t.Fatalf("reqs = %+v, err = %v", reqs, err)
	}
}

func FuzzReadInput(f *testing.F) {
	f.Add([]byte(`{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"prompt":"x"}}` + "\n{\"prompt\":1}\n"))
	f.Add([]byte("\xff\xfe{\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := ReadInput(strings.NewReader(string(b)))
		if err != nil {
			if !errors.Is(err, ErrDuplicateID) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		for _, r := range reqs {
			if r.CustomID == "" || (r.Invalid == "" && (r.URL != Completions && r.URL != ChatCompletions || len(r.Body) == 0)) {
				t.Fatalf("bad request %+v", r)
			}
		}
	})
}
