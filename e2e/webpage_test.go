package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"superfluid/app"
)

// The built-in web page, used as a person would in headless Chromium
// (e2e/browser/webpage.mjs drives it through playwright-core) against a
// real server with two synthetic models: load the page, chat and see the
// streamed answer with its speed, switch models, stop a generation, keep
// the conversation over a reload, and watch the live view show a lane
// busy and then idle. Screenshots go to $ARTIFACTS/webpage when ARTIFACTS
// is set, else to the test's temporary directory; the log names them.
func TestWebPageInBrowser(t *testing.T) {
	node, chromium, script := browserTools(t)
	dir := t.TempDir()
	o := modelsOptions(seededModel(t, dir, "alpha", 7), "alpha")
	o.Models = []app.ModelSpec{{Path: seededModel(t, dir, "beta", 23)}}
	// Room for long generations (the tiny model decodes thousands of
	// tokens a second): the stop and the live view's busy lane need one
	// that outlasts the browser's reaction.
	o.Ctx = 16384
	st := startStack(t, o)

	runBrowser(t, node, chromium, script, st.URL(), screenshotDir(t, "webpage"), "alpha", "beta")
}

// With --api-key, the page asks for the key when the API answers 401,
// chats with it and keeps it over a reload.
func TestWebPageAPIKey(t *testing.T) {
	node, chromium, script := browserTools(t)
	o := app.Options{}
	o.HTTP.APIKey = testAPIKey
	st := startStack(t, o)
	runBrowser(t, node, chromium, script, st.URL(), screenshotDir(t, "webpage-key"), "--key", testAPIKey)
}

// runBrowser runs the driver script against url with args after it,
// logs what it printed, and fails the test when it failed.
func runBrowser(t *testing.T, node, chromium, script, url string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script, url}, args...)...)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		t.Log(line)
	}
	if err != nil {
		t.Fatalf("the browser test failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("the browser test took %v", time.Since(start).Round(time.Millisecond))
}

// screenshotDir is where a browser test's screenshots go: $ARTIFACTS/name
// when ARTIFACTS is set, else the test's temporary directory.
func screenshotDir(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if a := os.Getenv("ARTIFACTS"); a != "" {
		dir = filepath.Join(a, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots go to %s", dir)
	return dir
}

// browserTools finds node, Debian's chromium and the driver script with
// its playwright-core (npm ci in e2e/browser, as .ci/run does), or skips
// saying which is missing.
func browserTools(t *testing.T) (node, chromium, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the browser test did not run (.ci/run installs it)")
	}
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		if chromium, err = exec.LookPath("chromium"); err != nil {
			t.Skip("chromium is not installed (apt-get install chromium, as .ci/run does): the browser test did not run")
		}
	}
	script, err = filepath.Abs(filepath.Join("browser", "webpage.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("browser", "node_modules", "playwright-core")); err != nil {
		t.Skip("playwright-core is not installed (npm ci in e2e/browser, as .ci/run does): the browser test did not run")
	}
	return node, chromium, script
}
