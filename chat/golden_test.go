package chat

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// templatesDir holds the real chat templates the goldens were rendered
// from; it sits outside the repository and is read in place.
const templatesDir = "../../shared/templates"

// goldenSpec is testdata/conversations.json, which testdata/render.py reads
// too: the conversations, the tools, the fixed clock and the token texts.
type goldenSpec struct {
	Now           string                `json:"now"`
	Tools         []json.RawMessage     `json:"tools"`
	Conversations map[string]goldenConv `json:"conversations"`
	Tokens        struct {
		Default struct{ BOS, EOS string } `json:"default"`
		ByName  []struct {
			Contains string `json:"contains"`
			BOS      string `json:"bos"`
			EOS      string `json:"eos"`
		} `json:"by_name"`
	} `json:"tokens"`
}

type goldenConv struct {
	Tools               bool            `json:"tools"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Messages            []goldenMessage `json:"messages"`
}

// goldenMessage is a message in OpenAI's shape with arguments as objects.
type goldenMessage struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func loadGoldenSpec(t *testing.T) goldenSpec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec goldenSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("conversations.json: %v", err)
	}
	return spec
}

func (s goldenSpec) request(c goldenConv) Request {
	r := Request{AddGenerationPrompt: c.AddGenerationPrompt}
	if c.Tools {
		r.Tools = s.Tools
	}
	for _, m := range c.Messages {
		msg := Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		r.Messages = append(r.Messages, msg)
	}
	return r
}

func (s goldenSpec) options(t *testing.T, template string) Options {
	now, err := time.Parse("2006-01-02T15:04:05", s.Now)
	if err != nil {
		t.Fatalf("conversations.json now: %v", err)
	}
	opts := Options{BOS: s.Tokens.Default.BOS, EOS: s.Tokens.Default.EOS, Now: func() time.Time { return now }}
	for _, rule := range s.Tokens.ByName {
		if strings.Contains(template, rule.Contains) {
			opts.BOS, opts.EOS = rule.BOS, rule.EOS
			break
		}
	}
	return opts
}

// TestGoldens renders every real template with every conversation and
// compares with what transformers' settings of Python jinja2 rendered
// (testdata/render.py): the same bytes, or a refusal where it refused, with
// the template's own message when it called raise_exception.
func TestGoldens(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(templatesDir, "*.jinja"))
	if len(paths) == 0 {
		t.Skipf("no templates in %s (the shared test data is absent)", templatesDir)
	}
	spec := loadGoldenSpec(t)
	convs := make([]string, 0, len(spec.Conversations))
	for name := range spec.Conversations {
		convs = append(convs, name)
	}
	sort.Strings(convs)
	matched, total := 0, 0
	var failed []string
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jinja")
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, parseErr := Parse(string(src), spec.options(t, name))
		ok := 0
		for _, conv := range convs {
			total++
			key := name + "." + conv
			why := checkGolden(tmpl, parseErr, name, conv, spec.request(spec.Conversations[conv]))
			_, known := knownDeviations[key]
			switch {
			case why == "" && known:
				failed = append(failed, key+": matches the reference now; remove it from knownDeviations")
			case why != "" && !known:
				failed = append(failed, key+": "+why)
			}
			if why == "" {
				ok++
			}
		}
		matched += ok
		t.Logf("%-55s %d/%d", name, ok, len(convs))
	}
	t.Logf("goldens: %d of %d renderings match the reference byte for byte or refuse as it does (%d templates; %d known deviations)",
		matched, total, len(paths), len(knownDeviations))
	for _, f := range failed {
		t.Error(f)
	}
}

// checkGolden returns why one rendering differs from its golden, or "".
func checkGolden(tmpl *Template, parseErr error, name, conv string, r Request) string {
	base := filepath.Join("testdata", "golden", name+"."+conv)
	var got string
	err := parseErr
	if err == nil {
		got, err = tmpl.Exact(r)
	}
	if want, rerr := os.ReadFile(base + ".txt"); rerr == nil {
		if err != nil {
			return "refused, reference renders: " + err.Error()
		}
		if got != string(want) {
			return "differs: " + firstDiff(got, string(want))
		}
		return ""
	}
	refusal, rerr := os.ReadFile(base + ".refused")
	if rerr != nil {
		return "no golden file (rerun testdata/render.py)"
	}
	if err == nil {
		return "rendered, reference refuses: " + string(refusal)
	}
	msg, raised := strings.CutPrefix(string(refusal), "TemplateError: ")
	var re *RaiseError
	if raised && (!errors.As(err, &re) || re.Message != msg) {
		return "refused with " + err.Error() + ", reference raised " + msg
	}
	return ""
}

// firstDiff shows where got and want part.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-40)
	return "at byte " + itoa(i) + ": got " + quote(got[lo:min(len(got), i+40)]) + ", want " + quote(want[lo:min(len(want), i+40)])
}

func itoa(i int) string     { return strconv.Itoa(i) }
func quote(s string) string { return strconv.Quote(s) }

// TestGoldensAreCurrent reruns testdata/render.py into a temporary
// directory and compares with the committed goldens, so they cannot drift
// from the script, the conversations or the templates. It needs python3
// with jinja2 (Debian's python3-jinja2).
func TestGoldensAreCurrent(t *testing.T) {
	if _, err := os.Stat(templatesDir); err != nil {
		t.Skipf("no templates in %s (the shared test data is absent)", templatesDir)
	}
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		t.Skipf("python3 with jinja2 unavailable (%v); install python3-jinja2 to check the goldens", err)
	}
	out := t.TempDir()
	cmd := exec.Command("python3", filepath.Join("testdata", "render.py"), templatesDir, out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render.py: %v\n%s", err, msg)
	}
	fresh, _ := filepath.Glob(filepath.Join(out, "*"))
	committed, _ := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if len(fresh) != len(committed) {
		t.Errorf("render.py wrote %d files, testdata/golden holds %d: rerun it", len(fresh), len(committed))
	}
	for _, path := range fresh {
		want, _ := os.ReadFile(path)
		got, err := os.ReadFile(filepath.Join("testdata", "golden", filepath.Base(path)))
		if err != nil || string(got) != string(want) {
			t.Errorf("testdata/golden/%s is stale or missing: rerun testdata/render.py", filepath.Base(path))
		}
	}
}
