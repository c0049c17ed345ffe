package command

import (
	"os"

	"golang.org/x/term"
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
