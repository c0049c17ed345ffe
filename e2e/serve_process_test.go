package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The real process: what an operator runs. These tests build the binary
// the way `make build` does (same environment, so the build cache holds
// llama.cpp and only our packages link) and drive it through flags,
// environment variables, its log and signals.

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// superfluidBinary builds the binary once per test run, or skips under
// -short: a cold link takes seconds, and the in-process stack already
// covers the HTTP behaviour.
func superfluidBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: building the superfluid binary takes ~10 s; the process tests need it")
	}
	binaryOnce.Do(func() {
		// The go command that runs these tests, where PATH does not have it.
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		binaryPath = filepath.Join(modelDir, "superfluid")
		cmd := exec.Command(goTool, "build", "-o", binaryPath, "..")
		cmd.Env = os.Environ() // the same CGO_* flags, or llama.cpp rebuilds
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// syncBuffer collects a process's stderr while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveProc is a running `superfluid serve`.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

// startServe runs `superfluid serve args…` with extra environment and
// waits for its "ready" log line, which carries the URL (--port 0 picks a
// free port, so the log is the only place to learn it).
func startServe(t testing.TB, env []string, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(superfluidBinary(t), append([]string{"serve"}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	deadline := time.After(60 * time.Second)
	for p.url == "" {
		select {
		case <-p.exited:
			t.Fatalf("serve exited before it was ready (%v):\n%s", p.err, p.stderr)
		case <-deadline:
			t.Fatalf("serve not ready after 60 s:\n%s", p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(line, "msg=ready") {
				p.url = logField(line, "url")
			}
		}
	}
	return p
}

// logField reads key=value from a slog text line.
func logField(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// wait waits for the process to exit (bounded) and returns its exit code.
func (p *serveProc) wait(t testing.TB, bound time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(bound):
		t.Fatalf("serve still running %v after it was told to stop:\n%s", bound, p.stderr)
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("serve: %v", p.err)
	}
	return 0
}

// serveFlagNames reads the flag names serve declares, from command/serve.go's
// source, so that a flag added there without help text fails here.
func serveFlagNames(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "command", "serve.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Flag") {
			return true
		}
		for _, el := range lit.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
					if v, ok := kv.Value.(*ast.BasicLit); ok {
						name, _ := strconv.Unquote(v.Value)
						names = append(names, name)
					}
				}
			}
		}
		return true
	})
	if len(names) < 10 {
		t.Fatalf("found only %d flags in command/serve.go: %v", len(names), names)
	}
	return names
}

// `serve --help` documents every flag with its usage and its SUPERFLUID_*
// variable; an unknown flag is one line on stderr and a failing exit.
func TestServeProcessHelpAndBadFlags(t *testing.T) {
	bin := superfluidBinary(t)
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
	help := string(out)
	for _, name := range serveFlagNames(t) {
		env := "$SUPERFLUID_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		var line string
		for _, l := range strings.Split(help, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "--"+name+" ") { // its own line, not another's usage naming it
				line = l
			}
		}
		if line == "" || !strings.Contains(line, env) || len(strings.Fields(line)) < 5 {
			t.Errorf("--help does not document --%s with a usage and %s: %q", name, env, line)
		}
	}

	for _, args := range [][]string{
		{"serve", "--no-such-flag"},
		{"serve", "--model", "x.gguf", "--lanes", "many"},
		{"serve", "--model", "x.gguf", "stray-argument"},
	} {
		cmd := exec.Command(bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("%v: exit %v, want a failure", args, err)
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "superfluid: ") || stdout.Len() != 0 {
			t.Errorf("%v: want one error line on stderr and nothing on stdout; stderr %q, stdout %q", args, stderr.String(), stdout.String())
		}
	}
}

// The life of a process: one "ready" line with the URL of the free port it
// took; /health open, everything else behind the key it was given through
// SUPERFLUID_API_KEY; SIGTERM during a long streaming answer lets that
// answer finish while newcomers get 503, and the process then exits 0.
func TestServeProcessLifecycleAndDrain(t *testing.T) {
	// SUPERFLUID_ALIAS loses to --alias: a flag beats the environment.
	p := startServe(t, []string{"SUPERFLUID_API_KEY=sekret", "SUPERFLUID_THREADS=1", "SUPERFLUID_CTX=8192", "SUPERFLUID_ALIAS=from-env"},
		"--model", tinyModel(t), "--port", "0", "--drain", "2m", "--alias", "tiny", "--park-dir", "off")
	if !strings.HasPrefix(p.url, "http://127.0.0.1:") || strings.HasSuffix(p.url, ":0") {
		t.Fatalf("ready url %q", p.url)
	}
	noKeepAlive := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	get := func(path, key string) int {
		req, _ := http.NewRequest("GET", p.url+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := noKeepAlive.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get("/health", ""); s != 200 {
		t.Fatalf("/health: %d", s)
	}
	if s := get("/v1/models", ""); s != 401 {
		t.Errorf("/v1/models without the key from SUPERFLUID_API_KEY: %d, want 401", s)
	}
	if s := get("/v1/models", "sekret"); s != 200 {
		t.Fatalf("/v1/models with the key: %d", s)
	}
	var props struct {
		Alias    string `json:"model_alias"`
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	req, _ := http.NewRequest("GET", p.url+"/props", nil)
	req.Header.Set("x-api-key", "sekret")
	if resp, err := noKeepAlive.Do(req); err != nil {
		t.Fatal(err)
	} else {
		err := json.NewDecoder(resp.Body).Decode(&props)
		resp.Body.Close()
		if err != nil || props.Settings.NCtx != 8192 || props.Alias != "tiny" {
			t.Errorf("/props: n_ctx %d (SUPERFLUID_CTX=8192), alias %q (--alias tiny): %v", props.Settings.NCtx, props.Alias, err)
		}
	}

	// A long streamed answer: 4000 tokens take the tiny model seconds, a
	// hundred times the drain checks below.
	body := `{"model":"tiny","messages":[{"role":"user","content":"go on"}],"max_tokens":4000,"temperature":0,"stream":true}`
	req, _ = http.NewRequestWithContext(context.Background(), "POST", p.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sekret")
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Newcomers are refused with 503 while the stream drains (until the
	// signal lands they may still be served).
	pollUntil(t, 30*time.Second, func() (bool, string) {
		s := get("/v1/models", "sekret")
		return s == 503, fmt.Sprintf("a new request during the drain got %d", s)
	})

	events, done, finish := 0, false, ""
	for sc.Scan() {
		line := sc.Text()
		if line == "data: [DONE]" {
			done = true
			break
		}
		if strings.HasPrefix(line, "data: ") {
			events++
			if i := strings.Index(line, `"finish_reason":"`); i >= 0 {
				finish = line[i+len(`"finish_reason":"`):]
				finish = finish[:strings.IndexByte(finish, '"')]
			}
		}
	}
	if !done || finish != "length" || events < 1000 {
		t.Errorf("the draining stream ended after %d events, done=%v, finish %q (%v)", events, done, finish, sc.Err())
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM:\n%s", code, p.stderr)
	}
	log := p.stderr.String()
	if n := strings.Count(log, "msg=ready"); n != 1 {
		t.Errorf("%d ready lines:\n%s", n, log)
	}
	for _, want := range []string{"msg=\"shutting down", "msg=stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %s line:\n%s", want, log)
		}
	}
}
