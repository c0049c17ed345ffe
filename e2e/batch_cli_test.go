package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"superfluid/app"
	"superfluid/batch"
	sfhttp "superfluid/http"
)

// `superfluid batch` as a user runs it: the real binary, a JSONL file in,
// a JSONL file out.

// batchInput writes n requests (completions, chats and bare prompts, all
// greedy, each asking for its top-5 alternatives so that a near-tie can be
// recognised) and the malformed lines given, and returns the request
// bodies by custom_id.
func batchInput(t *testing.T, path string, n, maxTokens int, malformed ...string) map[string]batchReq {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	words := func() string {
		var b strings.Builder
		for range 6 + rng.IntN(20) {
			b.WriteString(promptWords[rng.IntN(len(promptWords))] + " ")
		}
		return strings.TrimSpace(b.String())
	}
	reqs := map[string]batchReq{}
	var buf bytes.Buffer
	for i := range n {
		var line []byte
		var r batchReq
		switch {
		case i%10 == 9: // a bare prompt line: custom_id line-N
			r = batchReq{id: fmt.Sprintf("line-%d", i+1), url: batch.Completions,
				body: map[string]any{"prompt": words(), "max_tokens": maxTokens, "temperature": 0, "logprobs": 5}}
			line, _ = json.Marshal(r.body)
		case i%5 == 3:
			r = batchReq{id: fmt.Sprintf("chat-%d", i), url: batch.ChatCompletions,
				body: map[string]any{"model": "tiny", "messages": []any{map[string]any{"role": "user", "content": words()}},
					"max_tokens": maxTokens, "temperature": 0, "logprobs": true, "top_logprobs": 5}}
		default:
			r = batchReq{id: fmt.Sprintf("cmpl-%d", i), url: batch.Completions,
				body: map[string]any{"model": "tiny", "prompt": words(), "max_tokens": maxTokens, "temperature": 0, "logprobs": 5}}
		}
		if line == nil {
			line, _ = json.Marshal(map[string]any{"custom_id": r.id, "method": "POST", "url": r.url, "body": r.body})
		}
		reqs[r.id] = r
		buf.Write(line)
		buf.WriteByte('\n')
	}
	for _, m := range malformed {
		buf.WriteString(m + "\n")
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return reqs
}

type batchReq struct {
	id, url string
	body    map[string]any
}

// readBatchOutput parses an output file, failing on a repeated custom_id
// or a line that is not a record.
func readBatchOutput(t *testing.T, path string) map[string]batch.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]batch.Record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r batch.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("output line %.200q: %v", sc.Text(), err)
		}
		if _, dup := out[r.CustomID]; dup {
			t.Fatalf("custom_id %q answered twice", r.CustomID)
		}
		out[r.CustomID] = r
	}
	return out
}

func runBatch(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(superfluidBinary(t), append([]string{"batch"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stderr.String(), err
}

// A 200-request file: one record per custom_id, malformed lines answered
// by error records, and every answer the one the same request gets alone.
func TestBatchCLIAnswersLikeSingleRequests(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	reqs := batchInput(t, in, 200, 8,
		`{"custom_id":"broken", "url":`,
		`{"custom_id":"embed","method":"POST","url":"/v1/moderations","body":{"input":"x"}}`,
		`{"custom_id":"streamed","method":"POST","url":"/v1/completions","body":{"prompt":"x","stream":true}}`,
		`{"custom_id":"other-model","method":"POST","url":"/v1/completions","body":{"model":"gpt-4o","prompt":"x"}}`)
	stderr, err := runBatch(t, "--model", tinyModel(t), "--alias", "tiny", "--threads", "1", "--lanes", "4", "--ctx", "4096", in, "-o", out)
	if err != nil {
		t.Fatalf("batch: %v\n%s", err, stderr)
	}
	// Piped, a batch prints its summary line and nothing else.
	if !strings.HasPrefix(stderr, "204/204 requests answered, 4 failed") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr is not just the summary:\n%s", stderr)
	}
	recs := readBatchOutput(t, out)
	if len(recs) != 204 {
		t.Fatalf("%d records, want 204", len(recs))
	}
	for id, code := range map[string]string{"line-201": batch.CodeInvalidRequest, "embed": batch.CodeInvalidRequest, "streamed": batch.CodeInvalidRequest} {
		if r := recs[id]; r.Error == nil || r.Error.Code != code || r.Response != nil {
			t.Errorf("%s: %+v, want an error record %s", id, r, code)
		}
	}
	if r := recs["other-model"]; r.Response == nil || r.Response.StatusCode != http.StatusNotFound || !strings.Contains(string(r.Response.Body), "model_not_found") {
		t.Errorf("other-model: %+v, want the server's 404", r)
	}

	st := startStack(t, app.Options{Lanes: 4})
	ties := 0
	for id, q := range reqs {
		r := recs[id]
		if !r.Succeeded() {
			t.Fatalf("%s: %+v", id, r)
		}
		body, _ := json.Marshal(q.body)
		resp, err := http.Post(st.URL()+q.url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var alone bytes.Buffer
		alone.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s alone: %d %s", id, resp.StatusCode, alone.String())
		}
		tied, bad := sameGreedyAnswer(t, r.Response.Body, alone.Bytes())
		if bad != "" {
			t.Errorf("%s: the batch answered differently from the request alone: %s", id, bad)
		}
		if tied {
			ties++
		}
	}
	if ties > 0 {
		t.Logf("%d of %d answers took a near-tie the other way", ties, len(reqs))
	}
}

// answerTokens reads the tokens of a completion or chat answer and the
// alternatives at each position.
func answerTokens(t *testing.T, body []byte) (text string, toks []string, tops []map[string]float64) {
	t.Helper()
	var a struct {
		Choices []struct {
			Text     string
			Message  struct{ Content string }
			Logprobs struct {
				Tokens      []string
				TopLogprobs []map[string]float64 `json:"top_logprobs"`
				Content     []struct {
					Token       string
					TopLogprobs []struct {
						Token   string
						Logprob float64
					} `json:"top_logprobs"`
				}
			}
		}
	}
	if err := json.Unmarshal(body, &a); err != nil || len(a.Choices) != 1 {
		t.Fatalf("answer %.300s: %v", body, err)
	}
	c := a.Choices[0]
	if c.Logprobs.Content == nil {
		return c.Text, c.Logprobs.Tokens, c.Logprobs.TopLogprobs
	}
	for _, p := range c.Logprobs.Content {
		m := map[string]float64{}
		for _, alt := range p.TopLogprobs {
			m[alt.Token] = alt.Logprob
		}
		toks, tops = append(toks, p.Token), append(tops, m)
	}
	return c.Message.Content, toks, tops
}

// sameGreedyAnswer compares a batch's answer with the request's answer
// alone: equal, or parting at a near-tie (see tieNats) where the batch took
// the other of two candidates the lone run could not tell apart — after
// which the rest is not comparable.
func sameGreedyAnswer(t *testing.T, got, alone []byte) (tied bool, bad string) {
	gText, gToks, _ := answerTokens(t, got)
	aText, aToks, aTops := answerTokens(t, alone)
	if gText == aText && len(gToks) == len(aToks) {
		return false, ""
	}
	d := 0
	for d < len(gToks) && d < len(aToks) && gToks[d] == aToks[d] {
		d++
	}
	if d == len(gToks) || d == len(aToks) {
		return false, fmt.Sprintf("text %q vs %q", gText, aText)
	}
	best, okBest := aTops[d][aToks[d]]
	mine, okMine := aTops[d][gToks[d]]
	if !okBest || !okMine || best-mine > tieNats {
		return false, fmt.Sprintf("at token %d: %q, alone %q (alternatives %v); text %q vs %q", d, gToks[d], aToks[d], aTops[d], gText, aText)
	}
	return true, ""
}

// Killed mid-run, a rerun with the same -o completes the file: no custom_id
// missing, none twice, a line the kill cut short dropped.
func TestBatchCLIResumesAfterKill(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	const n = 300 // long enough that the kill lands midway on a fast machine
	batchInput(t, in, n, 64)
	args := []string{"--model", tinyModel(t), "--alias", "tiny", "--threads", "1", "--lanes", "2", "--parallel", "2", "--ctx", "4096", in, "-o", out}
	cmd := exec.Command(superfluidBinary(t), append([]string{"batch"}, args...)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Kill once a few records are written; the file is the only witness.
	deadline := time.After(2 * time.Minute)
	for lines := 0; lines < 5; lines = countLines(out) {
		select {
		case err := <-exited:
			t.Fatalf("batch exited before it could be killed (%v):\n%s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no records after 2 minutes:\n%s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	first := readBatchOutput(t, out)
	if len(first) >= n {
		t.Fatalf("all %d answered before the kill; the test needs longer requests", n)
	}
	// What a kill during a write leaves: a line cut short.
	f, _ := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"batch_req_x","custom_id":"cmpl-0","response":{"status_co`)
	f.Close()

	stderr2, err := runBatch(t, args...)
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, stderr2)
	}
	want := fmt.Sprintf("%d/%d requests answered (%d from an earlier run)", n, n, len(first))
	if !strings.Contains(stderr2, want) {
		t.Errorf("rerun summary: want %q in\n%s", want, stderr2)
	}
	all := readBatchOutput(t, out)
	if len(all) != n {
		t.Fatalf("%d records after the rerun, want %d", len(all), n)
	}
	for id, r := range first {
		if all[id].ID != r.ID {
			t.Errorf("%s was answered again after the kill", id)
		}
	}
	for id, r := range all {
		if !r.Succeeded() {
			t.Errorf("%s: %+v", id, r)
		}
	}
}

// Ctrl-C stops a run with the output valid and says how to resume.
func TestBatchCLIInterrupt(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	batchInput(t, in, 300, 64)
	cmd := exec.Command(superfluidBinary(t), "batch", "--model", tinyModel(t), "--alias", "tiny", "--threads", "1", "--lanes", "2", "--ctx", "4096", in, "-o", out)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for countLines(out) < 2 {
		select {
		case err := <-exited:
			t.Fatalf("batch exited before the interrupt (%v):\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err == nil {
			t.Fatalf("interrupted batch exited 0:\n%s", stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("batch still running 60 s after SIGINT:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "rerun the same command to resume") {
		t.Errorf("no resume hint:\n%s", stderr.String())
	}
	b, _ := os.ReadFile(out)
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("output does not end with a whole line: %q", b[max(0, len(b)-80):])
	}
	readBatchOutput(t, out)
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte{'\n'})
}

// --url sends the file to a running server (here with an API key) instead
// of loading the model; the answers are the same requests' answers.
func TestBatchCLIAgainstServer(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	reqs := batchInput(t, in, 30, 8)
	st := startStack(t, app.Options{Lanes: 4, HTTP: sfhttp.Config{APIKey: "k3y"}})
	if stderr, err := runBatch(t, "--url", st.URL(), in, "-o", out); err != nil || !strings.Contains(stderr, "30/30 requests answered, 30 failed") {
		t.Fatalf("without the key: %v\n%s", err, stderr)
	}
	if recs := readBatchOutput(t, out); recs["cmpl-0"].Response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the key: %+v", recs["cmpl-0"])
	}
	// A refused key is not the requests' fault: the rerun sends them all.
	stderr, err := runBatch(t, "--url", st.URL()+"/v1", "--api-key", "k3y", in, "-o", out)
	if err != nil || !strings.HasPrefix(stderr, "30/30 requests answered;") {
		t.Fatalf("batch --url: %v\n%s", err, stderr)
	}
	recs := readBatchOutput(t, out)
	if len(recs) != len(reqs) {
		t.Fatalf("%d records, want %d", len(recs), len(reqs))
	}
	for id, r := range recs {
		if !r.Succeeded() {
			t.Fatalf("%s: %+v", id, r)
		}
	}
}
