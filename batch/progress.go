package batch

import (
	"fmt"
	"strings"
	"time"
)

// TokensPerSecond is the generation rate of this run.
func (p Progress) TokensPerSecond() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Tokens) / p.Elapsed.Seconds()
}

// ETA extrapolates this run's request rate over what is left; 0 when
// nothing is known yet.
func (p Progress) ETA() time.Duration {
	ran := p.Done - p.Resumed
	if ran <= 0 || p.Elapsed <= 0 {
		return 0
	}
	left := p.Total - p.Done
	return time.Duration(float64(p.Elapsed) / float64(ran) * float64(left)).Round(time.Second)
}

// Bar renders p as one terminal line of about width columns:
//
//	[#########...........]  90/200  41.3 tok/s  ETA 1m05s  2 failed
func (p Progress) Bar(width int) string {
	tail := fmt.Sprintf(" %*d/%d  %.1f tok/s", len(fmt.Sprint(p.Total)), p.Done, p.Total, p.TokensPerSecond())
	if eta := p.ETA(); eta > 0 {
		tail += "  ETA " + eta.String()
	}
	if p.Failed > 0 {
		tail += fmt.Sprintf("  %d failed", p.Failed)
	}
	n := width - len(tail) - 2
	if n < 10 {
		n = 10
	}
	fill := n
	if p.Total > 0 {
		fill = n * p.Done / p.Total
	}
	return "[" + strings.Repeat("#", fill) + strings.Repeat(".", n-fill) + "]" + tail
}

// Summary is the line a run ends with.
func (p Progress) Summary() string {
	s := fmt.Sprintf("%d/%d requests answered", p.Done, p.Total)
	if p.Resumed > 0 {
		s += fmt.Sprintf(" (%d from an earlier run)", p.Resumed)
	}
	if p.Failed > 0 {
		s += fmt.Sprintf(", %d failed", p.Failed)
	}
	return s + fmt.Sprintf("; %d tokens generated in %s (%.1f tok/s)", p.Tokens, p.Elapsed.Round(time.Millisecond), p.TokensPerSecond())
}
