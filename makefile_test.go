package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The README's first command is a plain `make`: its default goal must be
// the binary. (An included makefile's first rule once took that place, and
// `make` built one header.)
func TestPlainMakeBuildsTheBinary(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this machine")
	}
	out, err := exec.Command("make", "-n").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-o bin/superfluid .") {
		t.Fatalf("a plain make does not build bin/superfluid; it would run:\n%s", out)
	}
}
