package chat

import (
	"os"
	"path/filepath"
	"testing"
)

// conversation is the system+user+assistant+user exchange every format test
// renders; its expected renderings are written by hand in the tests.
var conversation = []Message{
	{Role: RoleSystem, Content: "You are a terse assistant."},
	{Role: RoleUser, Content: "What is 2+2?"},
	{Role: RoleAssistant, Content: "4."},
	{Role: RoleUser, Content: "And 3+3?"},
}

// testdataTemplate reads a template transcribed into testdata/.
func testdataTemplate(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func mustParse(tb testing.TB, src string, opts Options) *Template {
	tb.Helper()
	tmpl, err := Parse(src, opts)
	if err != nil {
		tb.Fatalf("Parse: %v", err)
	}
	return tmpl
}

// checkRender renders msgs and compares the result with want exactly.
func checkRender(t *testing.T, tmpl *Template, msgs []Message, agp bool, want string) {
	t.Helper()
	got, err := tmpl.Render(msgs, agp)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if got != want {
		t.Errorf("Render mismatch\n got: %q\nwant: %q", got, want)
	}
}
