package web

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// The page's scripts have their own unit tests (ui/test, node --test):
// the stream parser, the chat reducer, the figures' formatting, the live
// view's rows. They run here so that `go test` runs them; a machine
// without Node skips them and says so.
func TestScripts(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the web page's script tests (web/ui/test) did not run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "test/")
	cmd.Dir = "ui"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test web/ui/test: %v\n%s", err, out)
	}
	t.Logf("node --test web/ui/test passed")
}
