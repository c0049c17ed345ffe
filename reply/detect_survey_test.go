package reply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/chat"
)

// TestSurveyTemplates logs the format found for every shared template.
func TestSurveyTemplates(t *testing.T) {
	dir := "../../shared/templates"
	files, _ := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if len(files) == 0 {
		t.Skip("../shared/templates is absent")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := chat.Parse(string(src), chat.Options{BOS: "<s>", EOS: "</s>"})
		if err != nil {
			t.Logf("%-50s parse: %v", filepath.Base(f), err)
			continue
		}
		fm := Detect(tmpl, string(src))
		p, _ := renderProbe(tmpl)
		t.Logf("%-50s %-12s think=%v one=%q", filepath.Base(f), fm.Name, fm.think != nil, strings.TrimSpace(p.one))
	}
}
