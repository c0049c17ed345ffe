package statusui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"superfluid/pull"
	"superfluid/status"
)

var (
	titleStyle   = lipgloss.NewStyle().Bold(true)
	sectionStyle = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("6"))
	dimStyle     = lipgloss.NewStyle().Faint(true)
)

// View is `superfluid top`'s screen for st (nil: nothing received yet),
// note the connection's state ("" when the stream is live), on a terminal
// of width × height: the header, the models, the lanes, the queues per
// class, the cache tiers and a sparkline of tokens/s. Lines are cut to the
// width; when the height is short the lane table gives up rows first.
func View(st *status.Status, note string, width, height int) string {
	width, height = max(width, 20), max(height, 3)
	var head, tail []string
	if st == nil {
		head = append(head, titleStyle.Render("superfluid top"), "", "waiting for the server's status…")
	} else {
		head = append(head, header(st))
		head = append(head, "", sectionStyle.Render("MODELS"))
		head = append(head, models(st)...)
		tail = append(tail, "", sectionStyle.Render("QUEUES")+"  "+queues(st))
		tail = append(tail, "", sectionStyle.Render("CACHE"))
		tail = append(tail, caches(st)...)
		tail = append(tail, "", sectionStyle.Render("TOKENS/S")+dimStyle.Render(fmt.Sprintf("  every %gs, last %s", st.Throughput.IntervalSeconds, span(st.Throughput))))
		tail = append(tail, sparklines(st.Throughput, width)...)
	}
	footer := dimStyle.Render("q quit")
	if note != "" {
		footer = note + "  " + footer
	}
	tail = append(tail, "", footer)
	var lanes []string
	if st != nil {
		lanes = append([]string{"", sectionStyle.Render("LANES")}, laneRows(st)...)
	}
	if room := height - len(head) - len(tail); len(lanes) > room {
		// The blank line, title and header row, as many lanes as fit and
		// a line saying how many did not; none at all when even that
		// does not fit.
		if room < 5 {
			lanes = nil
		} else {
			hidden := len(lanes) - (room - 1)
			lanes = append(lanes[:room-1], dimStyle.Render(fmt.Sprintf("… %d more lanes", hidden)))
		}
	}
	lines := append(append(head, lanes...), tail...)
	if len(lines) > height {
		lines = lines[:height]
	}
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, width, "…")
	}
	return strings.Join(lines, "\n")
}

func header(st *status.Status) string {
	busy, total := st.BusyLanes("")
	waiting := 0
	for _, q := range st.Queues {
		waiting += q.Waiting
	}
	last := ""
	if n := len(st.Throughput.Samples); n > 0 {
		s := st.Throughput.Samples[n-1]
		last = fmt.Sprintf(" · %.1f tok/s out, %.1f in", s.GeneratedPerSecond, s.PromptPerSecond)
	}
	return titleStyle.Render("superfluid "+st.Version) + fmt.Sprintf("  up %s · %d model%s · lanes %d/%d busy · %d waiting · %d preemptions%s",
		uptime(st.UptimeSeconds), len(st.Models), pluralS(len(st.Models)), busy, total, waiting, st.Preemptions, last)
}

func models(st *status.Status) []string {
	if len(st.Models) == 0 {
		return []string{dimStyle.Render("no model loaded")}
	}
	rows := []string{dimStyle.Render(fmt.Sprintf("%-24s %-10s %9s %7s %6s %9s %9s  %s", "NAME", "KIND", "SIZE", "CTX", "LANES", "PROMPT", "GEN", "UNTIL"))}
	for _, m := range st.Models {
		lanes := "-"
		if m.Kind == "generation" {
			busy, total := st.BusyLanes(m.Name)
			lanes = fmt.Sprintf("%d/%d", busy, total)
		}
		rows = append(rows, fmt.Sprintf("%-24s %-10s %9s %7d %6s %9d %9d  %s", m.Name, m.Kind, pull.FormatSize(m.SizeBytes), m.Context, lanes,
			m.PromptTokens, m.GeneratedTokens, Until(m.ExpiresAt, st.Now)))
	}
	return rows
}

func laneRows(st *status.Status) []string {
	rows := []string{dimStyle.Render(fmt.Sprintf("%-24s %3s %-8s %-11s %-9s %7s %7s %7s %7s %7s", "MODEL", "#", "PHASE", "CLASS", "API", "PROMPT", "CACHED", "GEN", "TOK/S", "AGE"))}
	if len(st.Lanes) == 0 {
		return append(rows, dimStyle.Render("no lanes (no generation model loaded)"))
	}
	for _, l := range st.Lanes {
		if !l.Busy() {
			rows = append(rows, dimStyle.Render(fmt.Sprintf("%-24s %3d %s", l.Model, l.Index, l.Phase)))
			continue
		}
		prompt := fmt.Sprint(l.PromptTokens)
		if l.Phase == status.PhasePrefill {
			prompt = fmt.Sprintf("%d/%d", l.PrefilledTokens, l.PromptTokens)
		}
		rows = append(rows, fmt.Sprintf("%-24s %3d %-8s %-11s %-9s %7s %7d %7d %7.1f %7s", l.Model, l.Index, l.Phase, l.Class, orDash(l.API),
			prompt, l.CachedTokens, l.GeneratedTokens, l.TokensPerSecond, ms(l.AgeMS)))
	}
	return rows
}

func queues(st *status.Status) string {
	parts := make([]string, 0, len(st.Queues))
	for _, q := range st.Queues {
		p := fmt.Sprintf("%s %d", q.Class, q.Waiting)
		if q.Waiting > 0 {
			p += " (oldest " + ms(q.OldestWaitMS) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " · ")
}

func caches(st *status.Status) []string {
	var rows []string
	for _, m := range st.Models {
		c := m.Cache
		if c == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("%-24s hit %3.0f%% (%d/%d) · resident %s · host %s · parked %s", m.Name, 100*c.HitRate, c.Hits, c.Hits+c.Misses,
			tier(c.Resident), tier(c.Host), tier(c.Parked)))
	}
	if len(rows) == 0 {
		rows = append(rows, dimStyle.Render("no prefix cache"))
	}
	return rows
}

func tier(t status.Tier) string {
	return fmt.Sprintf("%d/%s/%d hits", t.Entries, pull.FormatSize(t.Bytes), t.Hits)
}

// sparklines plots generated and prompt tokens/s, the newest samples that
// fit the width, each scaled to its own peak.
func sparklines(t status.Throughput, width int) []string {
	const label = 22
	n := max(width-label, 1)
	samples := t.Samples[max(len(t.Samples)-n, 0):]
	gen := make([]float64, len(samples))
	prompt := make([]float64, len(samples))
	for i, s := range samples {
		gen[i], prompt[i] = s.GeneratedPerSecond, s.PromptPerSecond
	}
	return []string{
		fmt.Sprintf("%-9s %10.1f  %s", "generated", last(gen), Sparkline(gen)),
		fmt.Sprintf("%-9s %10.1f  %s", "prompt", last(prompt), Sparkline(prompt)),
	}
}

var bars = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws vs as one bar each, the peak full height; all zero is
// the lowest bar.
func Sparkline(vs []float64) string {
	peak := 0.0
	for _, v := range vs {
		peak = max(peak, v)
	}
	out := make([]rune, len(vs))
	for i, v := range vs {
		k := 0
		if peak > 0 && v > 0 {
			k = min(int(v/peak*float64(len(bars)-1)+0.5), len(bars)-1)
		}
		out[i] = bars[k]
	}
	return string(out)
}

func last(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1]
}

func span(t status.Throughput) string {
	return time.Duration(float64(len(t.Samples)) * t.IntervalSeconds * float64(time.Second)).String()
}

func uptime(secs float64) string {
	return (time.Duration(secs) * time.Second).String()
}

func ms(n int64) string {
	d := time.Duration(n) * time.Millisecond
	if d < time.Second {
		return d.String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
