package pull

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bar draws a download's progress on one terminal line — bytes done and
// total, a bar, the rate and the time left — redrawn in place with \r at
// most five times a second. Its Update fits Options.OnProgress. Use it
// only when the writer is a terminal: elsewhere the redraws
// would pile up as noise.
type Bar struct {
	w     io.Writer
	now   func() time.Time
	start time.Time // of the first update
	base  int64     // bytes on disk at start: the rate counts only new ones
	last  time.Time // of the last draw
	drawn bool
	p     Progress
}

// barEvery is the least time between redraws.
const barEvery = 200 * time.Millisecond

// NewBar returns a Bar drawing on w.
func NewBar(w io.Writer) *Bar { return &Bar{w: w, now: time.Now} }

// Update records p and redraws when the last draw is old enough or the
// download is complete.
func (b *Bar) Update(p Progress) {
	if p.Stage != Downloading { // the bar shows bytes; Finish ends it
		return
	}
	now := b.now()
	if b.start.IsZero() || p.Done < b.base {
		b.start, b.base = now, p.Done
	}
	b.p = p
	if b.drawn && now.Sub(b.last) < barEvery && (p.Total < 0 || p.Done < p.Total) {
		return
	}
	b.last, b.drawn = now, true
	fmt.Fprintf(b.w, "\r%s\x1b[K", b.line(now))
}

// Finish draws the last state and ends the line, if anything was drawn.
func (b *Bar) Finish() {
	if !b.drawn {
		return
	}
	fmt.Fprintf(b.w, "\r%s\x1b[K\n", b.line(b.now()))
	b.drawn = false
}

// line renders the current state, e.g.
// "qwen2.5-0.5b-instruct-q4_k_m.gguf  245.3 MB / 491.4 MB  50% [##########          ]  41.2 MB/s  ETA 6s".
func (b *Bar) line(now time.Time) string {
	p := b.p
	var s strings.Builder
	name := p.Name
	if r := []rune(name); len(r) > 32 {
		name = string(r[:31]) + "…"
	}
	s.WriteString(name + "  " + FormatSize(p.Done))
	if p.Total > 0 {
		frac := min(float64(p.Done)/float64(p.Total), 1)
		const cells = 20
		full := int(frac * cells)
		fmt.Fprintf(&s, " / %s %3d%% [%s%s]", FormatSize(p.Total), int(frac*100), strings.Repeat("#", full), strings.Repeat(" ", cells-full))
	}
	elapsed := now.Sub(b.start)
	if elapsed <= 0 || p.Done <= b.base {
		return s.String()
	}
	rate := float64(p.Done-b.base) / elapsed.Seconds()
	fmt.Fprintf(&s, "  %s/s", FormatSize(int64(rate)))
	if p.Total > 0 && p.Done < p.Total {
		s.WriteString("  ETA " + formatETA(time.Duration(float64(p.Total-p.Done)/rate*float64(time.Second))))
	}
	return s.String()
}

func formatETA(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}
