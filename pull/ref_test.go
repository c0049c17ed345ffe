package pull

import (
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	cases := []struct {
		in   string
		want Ref
		str  string
	}{
		{"hf.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen2.5-0.5b-instruct-q4_k_m.gguf",
			Ref{Repo: "Qwen/Qwen2.5-0.5B-Instruct-GGUF", File: "qwen2.5-0.5b-instruct-q4_k_m.gguf", Revision: "main"},
			"hf.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen2.5-0.5b-instruct-q4_k_m.gguf"},
		{"hf.co/org/repo:Q4_K_M", Ref{Repo: "org/repo", File: "Q4_K_M", Revision: "main"}, "hf.co/org/repo:Q4_K_M"},
		{"HF.CO/org/repo", Ref{Repo: "org/repo", Revision: "main"}, "hf.co/org/repo"},
		{"huggingface.co/org/repo:sub/dir/m.gguf", Ref{Repo: "org/repo", File: "sub/dir/m.gguf", Revision: "main"}, "hf.co/org/repo:sub/dir/m.gguf"},
		{"https://huggingface.co/org/repo/resolve/main/sub/m.gguf", Ref{Repo: "org/repo", File: "sub/m.gguf", Revision: "main"}, "hf.co/org/repo:sub/m.gguf"},
		{"https://huggingface.co/org/repo/blob/main/m.gguf?download=true", Ref{Repo: "org/repo", File: "m.gguf", Revision: "main"}, "hf.co/org/repo:m.gguf"},
		{"https://hf.co/org/repo/resolve/v1.0/m.gguf", Ref{Repo: "org/repo", File: "m.gguf", Revision: "v1.0"}, "https://huggingface.co/org/repo/resolve/v1.0/m.gguf"},
		{"https://huggingface.co/org/repo", Ref{Repo: "org/repo", Revision: "main"}, "hf.co/org/repo"},
		{"https://example.com/models/m.gguf", Ref{URL: "https://example.com/models/m.gguf"}, "https://example.com/models/m.gguf"},
		{"http://127.0.0.1:8000/x", Ref{URL: "http://127.0.0.1:8000/x"}, "http://127.0.0.1:8000/x"},
	}
	for _, c := range cases {
		got, err := ParseRef(c.in)
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("ParseRef(%q) = %+v (%q), %v; want %+v (%q)", c.in, got, got.String(), err, c.want, c.str)
		}
	}
	for _, bad := range []string{"", "qwen.gguf", "hf.co/org", "hf.co/org/repo/extra:f.gguf", "hf.co//repo", "hf.co/org/repo:../../x.gguf",
		"https://huggingface.co/org/repo/tree/main", "ftp://example.com/m.gguf"} {
		if r, err := ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) = %+v, want an error", bad, r)
		}
	}
}

func TestDownloadURLAndName(t *testing.T) {
	r, _ := ParseRef("hf.co/org/repo:sub dir/m #1.gguf")
	if got := r.downloadURL("http://hub"); got != "http://hub/org/repo/resolve/main/sub%20dir/m%20%231.gguf" {
		t.Fatalf("download URL %q", got)
	}
	for ref, want := range map[string]string{
		"hf.co/org/repo:sub/m.gguf":          "m.gguf",
		"https://example.com/a/b/m.gguf?x=1": "m.gguf",
		"https://example.com/download/model": "model.gguf",
	} {
		r, _ := ParseRef(ref)
		if got, err := localName("", r); err != nil || got != want {
			t.Errorf("localName(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	r, _ = ParseRef("https://example.com/")
	if _, err := localName("", r); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Errorf("a URL without a file name: %v", err)
	}
	if got, err := localName("mine", r); err != nil || got != "mine.gguf" {
		t.Errorf("--name mine: %q, %v", got, err)
	}
	for _, bad := range []string{"../x", "a/b", ".hidden", ".gguf"} {
		if got, err := localName(bad, r); err == nil {
			t.Errorf("--name %q accepted as %q", bad, got)
		}
	}
}

func TestPickFile(t *testing.T) {
	files := []string{"README.md", "m-Q4_0.gguf", "m-Q4_0_4_4.gguf", "m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "big/m-F16-00001-of-00002.gguf", "big/m-F16-00002-of-00002.gguf"}
	for file, want := range map[string]string{
		"q4_0":          "m-Q4_0.gguf", // stands alone, unlike Q4_0_4_4
		"Q4_0_4_4":      "m-Q4_0_4_4.gguf",
		"Q4_K_M":        "m-Q4_K_M.gguf",
		"Q4_K":          "error: 2 GGUF files matching",
		"F16":           "error: 2 GGUF files matching",
		"IQ2_XS":        "error: no GGUF file matching",
		"":              "error: has 6 GGUF files",
		"m-Q4_K_S.gguf": "m-Q4_K_S.gguf",
	} {
		r := Ref{Repo: "o/r", File: file, Revision: "main"}
		var got string
		if file != "" && !r.IsTag() {
			got = file // a file name is not looked up
		} else {
			f, err := r.pickFile(files)
			got = f
			if err != nil {
				got = "error: " + err.Error()
			}
		}
		if !strings.HasPrefix(got, want) && !(strings.HasPrefix(want, "error: ") && strings.Contains(got, want[len("error: "):])) {
			t.Errorf("%q: got %q, want %q", file, got, want)
		}
	}
	if f, err := (Ref{Repo: "o/r"}).pickFile([]string{"a.md", "only.gguf"}); err != nil || f != "only.gguf" {
		t.Errorf("the only GGUF file: %q, %v", f, err)
	}
	if _, err := (Ref{Repo: "o/r"}).pickFile([]string{"a.md"}); err == nil || !strings.Contains(err.Error(), "no GGUF files") {
		t.Errorf("no GGUF files: %v", err)
	}
}

func TestParseContentRange(t *testing.T) {
	for in, want := range map[string][3]int64{
		"bytes 100-199/1000": {100, 1000, 1},
		"bytes 0-0/*":        {0, -1, 1},
		"bytes */1000":       {-1, 1000, 1},
		"bytes 5-9":          {-1, -1, 0},
		"items 1-2/3":        {-1, -1, 0},
		"":                   {-1, -1, 0},
	} {
		first, total, ok := parseContentRange(in)
		if first != want[0] || total != want[1] || ok != (want[2] == 1) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v", in, first, total, ok)
		}
	}
}
