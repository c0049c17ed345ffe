package command

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"superfluid/batch"
)

// isTerminal reports whether f is a terminal: progress bars are drawn only
// there; piped, a command prints its final line alone.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

func terminalWidth(f *os.File) int {
	w, _, err := term.GetSize(int(f.Fd()))
	if err != nil || w <= 1 {
		return 80
	}
	return w - 1
}

// progressLine redraws a batch's progress bar on a terminal, at most five
// times a second; elsewhere it stays silent (the summary says it all).
type progressLine struct {
	w    io.Writer
	tty  bool
	last time.Time
	drew bool
}

func newProgressLine(w io.Writer) *progressLine {
	f, ok := w.(*os.File)
	return &progressLine{w: w, tty: ok && isTerminal(f)}
}

func (b *progressLine) update(p batch.Progress) {
	if !b.tty || (time.Since(b.last) < 200*time.Millisecond && p.Done < p.Total) {
		return
	}
	b.last = time.Now()
	b.drew = true
	fmt.Fprintf(b.w, "\r%s\x1b[K", p.Bar(terminalWidth(b.w.(*os.File))))
}

func (b *progressLine) finish() {
	if b.drew {
		fmt.Fprint(b.w, "\n")
	}
}
