package statusui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"superfluid/status"
)

func plain(s string) []string { return strings.Split(ansi.Strip(s), "\n") }

func TestViewShowsEverySection(t *testing.T) {
	lines := plain(View(sample(), "", 140, 40))
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		"superfluid v1  up 1h2m5s · 2 models · lanes 1/2 busy · 3 waiting · 2 preemptions · 20.0 tok/s out, 0.0 in",
		"qwen:0.5b                generation    1.5 GB    8192    1/2      1234       567  4 minutes from now",
		"nomic-embed              embedding   300.0 MB    2048      -         0         0  Forever",
		"qwen:0.5b                  0 decode   chat        openai        120      64      37    18.5    2.5s",
		"qwen:0.5b                  1 idle",
		"QUEUES  chat 0 · fim 0 · agent 0 · background 3 (oldest 1.5s)",
		"qwen:0.5b                hit  75% (3/4) · resident 2/3.0 MB/2 hits · host 1/1.0 MB/1 hits · parked 4/500.0 kB/0 hits",
		"TOKENS/S  every 2s, last 4s",
		"generated       20.0  ▅█",
		"prompt           0.0  █▁",
		"q quit",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no line %q in\n%s", want, text)
		}
	}
	if len(lines) > 40 {
		t.Errorf("%d lines on a 40-line terminal", len(lines))
	}
}

// Every line fits the width, the screen fits the height, and a short
// screen gives up lanes first, saying how many.
func TestViewFitsTheTerminal(t *testing.T) {
	st := sample()
	for i := 2; i < 30; i++ {
		st.Lanes = append(st.Lanes, status.Lane{Model: "qwen:0.5b", Index: i, Phase: "decode", Class: "background", GeneratedTokens: i})
	}
	for _, size := range [][2]int{{140, 60}, {80, 24}, {40, 10}, {20, 3}, {5, 1}} {
		lines := plain(View(st, "reconnecting: connection refused", size[0], size[1]))
		w, h := max(size[0], 20), max(size[1], 3)
		if len(lines) > h {
			t.Errorf("%v: %d lines", size, len(lines))
		}
		for _, l := range lines {
			if ansi.StringWidth(l) > w {
				t.Errorf("%v: line of width %d: %q", size, ansi.StringWidth(l), l)
			}
		}
	}
	text := strings.Join(plain(View(st, "", 140, 30)), "\n")
	if !strings.Contains(text, "more lanes") || !strings.Contains(text, "QUEUES") || !strings.Contains(text, "generated") {
		t.Errorf("a short screen keeps the queues, cache and plot and cuts lanes:\n%s", text)
	}
	if text := strings.Join(plain(View(st, "", 140, 60)), "\n"); strings.Contains(text, "more lanes") || !strings.Contains(text, fmt.Sprintf("%3d decode", 29)) {
		t.Errorf("a tall screen shows every lane:\n%s", text)
	}
}

func TestViewBeforeAnyStatus(t *testing.T) {
	text := strings.Join(plain(View(nil, "connecting to http://x", 80, 24)), "\n")
	if !strings.Contains(text, "waiting for the server's status") || !strings.Contains(text, "connecting to http://x") {
		t.Fatal(text)
	}
}

func TestSparkline(t *testing.T) {
	if got := Sparkline([]float64{0, 1, 2, 4, 8}); got != "▁▂▃▅█" {
		t.Errorf("%q", got)
	}
	if got := Sparkline([]float64{0, 0}); got != "▁▁" {
		t.Errorf("%q", got)
	}
}
