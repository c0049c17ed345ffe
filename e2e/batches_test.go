package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"superfluid/app"
	"superfluid/batch"
)

// The batch API on the real stack: a batch uploaded as a file runs in the
// background class, is interrupted by a restart of the server in the
// middle, resumes from its results file on the new server and completes
// with one answer per request — each the answer the request gets when
// sent directly (greedy decoding), or parting from it only at a near-tie
// (sameGreedyAnswer): the batch ran its requests beside each other, and a
// lane's logits may differ from a lone run's in the last bits.

// batchLines returns n /v1/completions batch lines with distinct prompts
// and the bodies they carry, by custom_id. Each asks for its top-5
// alternatives, so that a near-tie can be recognised.
func batchLines(n int) (string, map[string][]byte) {
	var b strings.Builder
	bodies := map[string][]byte{}
	for i := range n {
		id := fmt.Sprintf("req-%02d", i)
		body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": fmt.Sprintf("Item %d of the list: %s", i, strings.Repeat("word ", i%5)), "max_tokens": 8, "temperature": 0, "logprobs": 5})
		bodies[id] = body
		fmt.Fprintf(&b, `{"custom_id":%q,"method":"POST","url":"/v1/completions","body":%s}`+"\n", id, body)
	}
	return b.String(), bodies
}

// uploadBatchFile posts content as a multipart upload and returns the
// status and answer.
func uploadBatchFile(t *testing.T, base, purpose, content string) (int, []byte) {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	w.WriteField("purpose", purpose)
	fw, _ := w.CreateFormFile("file", "requests.jsonl")
	io.WriteString(fw, content)
	w.Close()
	return sendBody(t, "POST", base+"/v1/files", body.Bytes(), map[string]string{"Content-Type": w.FormDataContentType()})
}

type batchObject struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Status        string  `json:"status"`
	OutputFileID  *string `json:"output_file_id"`
	ErrorFileID   *string `json:"error_file_id"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
}

func getBatch(t *testing.T, base, id string) batchObject {
	t.Helper()
	status, body := sendBody(t, "GET", base+"/v1/batches/"+id, nil, nil)
	var b batchObject
	if status != 200 || json.Unmarshal(body, &b) != nil || b.ID != id || b.Object != "batch" {
		t.Fatalf("GET batch %s: %d %s", id, status, body)
	}
	return b
}

// holdAfter lets n requests through and holds every later one until its
// context ends (the server stopping), so that a batch stops part-way at a
// known point however fast the machine is.
type holdAfter struct {
	batch.Doer
	n, calls atomic.Int32
}

func (h *holdAfter) Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	if h.calls.Add(1) > h.n.Load() {
		<-ctx.Done()
		return 0, nil, ctx.Err()
	}
	return h.Doer.Do(ctx, method, url, body)
}

// countCalls counts the requests a batch sends.
type countCalls struct {
	batch.Doer
	calls atomic.Int32
}

func (c *countCalls) Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	c.calls.Add(1)
	return c.Doer.Do(ctx, method, url, body)
}

func TestBatchesSurviveRestart(t *testing.T) {
	const total, before = 24, 6
	dir := t.TempDir()
	hold := &holdAfter{}
	hold.n.Store(before)
	st := startStack(t, app.Options{DataDir: dir, WrapBatchDoer: func(d batch.Doer) batch.Doer { hold.Doer = d; return hold }})
	lines, bodies := batchLines(total)
	status, body := uploadBatchFile(t, st.URL(), "batch", lines)
	var file struct {
		ID, Object, Purpose, Filename string
		Bytes                         int
	}
	if status != 200 || json.Unmarshal(body, &file) != nil || file.Object != "file" || file.Purpose != "batch" || file.Bytes != len(lines) || file.Filename != "requests.jsonl" {
		t.Fatalf("upload: %d %s", status, body)
	}
	create, _ := json.Marshal(map[string]any{"input_file_id": file.ID, "endpoint": "/v1/completions", "completion_window": "24h", "metadata": map[string]string{"job": "restart"}})
	status, body = sendBody(t, "POST", st.URL()+"/v1/batches", create, nil)
	var b batchObject
	if status != 200 || json.Unmarshal(body, &b) != nil || !strings.HasPrefix(b.ID, "batch_") {
		t.Fatalf("create: %d %s", status, body)
	}
	pollUntil(t, 2*time.Minute, func() (bool, string) {
		b = getBatch(t, st.URL(), b.ID)
		return b.RequestCounts.Completed == before, fmt.Sprintf("%+v", b)
	})
	if b.Status != "in_progress" || b.RequestCounts.Total != total {
		t.Fatalf("mid-way: %+v", b)
	}
	// The restart, in the middle of the batch.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	count := &countCalls{}
	st = startStack(t, app.Options{DataDir: dir, WrapBatchDoer: func(d batch.Doer) batch.Doer { count.Doer = d; return count }})
	pollUntil(t, 5*time.Minute, func() (bool, string) {
		b = getBatch(t, st.URL(), b.ID)
		return b.Status == "completed", fmt.Sprintf("%+v", b)
	})
	if b.RequestCounts.Completed != total || b.RequestCounts.Failed != 0 || b.OutputFileID == nil || b.ErrorFileID != nil {
		t.Fatalf("completed: %+v", b)
	}
	if n := count.calls.Load(); n != total-before {
		t.Errorf("the restarted server sent %d requests, want the %d not answered before", n, total-before)
	}
	status, out := sendBody(t, "GET", st.URL()+"/v1/files/"+*b.OutputFileID+"/content", nil, nil)
	if status != 200 {
		t.Fatalf("output: %d %s", status, out)
	}
	seen := map[string]bool{}
	ties := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var rec batch.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || !rec.Succeeded() {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		if seen[rec.CustomID] {
			t.Errorf("%s answered twice", rec.CustomID)
		}
		seen[rec.CustomID] = true
		tied, bad := sameGreedyAnswer(t, rec.Response.Body, directCompletion(t, st.URL(), bodies[rec.CustomID]))
		if bad != "" {
			t.Errorf("%s: the batch answered differently from the same request sent directly: %s", rec.CustomID, bad)
		}
		if tied {
			ties++
		}
	}
	if ties > 0 {
		t.Logf("%d of %d answers took a near-tie the other way", ties, total)
	}
	if len(seen) != total {
		t.Errorf("%d custom_ids in the output, want %d", len(seen), total)
	}
	checkIdle(t, st.URL())
}

// directCompletion sends body to /v1/completions on its own and returns
// the answer.
func directCompletion(t *testing.T, base string, body []byte) []byte {
	t.Helper()
	status, out := sendBody(t, "POST", base+"/v1/completions", body, nil)
	if status != 200 {
		t.Fatalf("direct: %d %s", status, out)
	}
	return out
}

// The official client uploads, creates, retrieves, lists and reads the
// output of a batch of chat requests, and sees OpenAI's errors.
func TestBatchesOpenAIClient(t *testing.T) {
	st := startStack(t, app.Options{DataDir: t.TempDir()})
	client := openaiClient(st)
	ctx := context.Background()
	var in strings.Builder
	for i := range 4 {
		body, _ := json.Marshal(greedyChat(fmt.Sprintf("Say %d", i), 4))
		fmt.Fprintf(&in, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":%s}`+"\n", i, body)
	}
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(in.String()), "chat.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil || f.Purpose != "batch" || f.Bytes != int64(in.Len()) {
		t.Fatalf("upload: %+v %v", f, err)
	}
	if got, err := client.Files.Get(ctx, f.ID); err != nil || got.ID != f.ID || got.Filename != "chat.jsonl" {
		t.Fatalf("get file: %+v %v", got, err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 2*time.Minute, func() (bool, string) {
		b, err = client.Batches.Get(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		return b.Status == openai.BatchStatusCompleted, string(b.Status)
	})
	if b.RequestCounts.Total != 4 || b.RequestCounts.Completed != 4 || b.OutputFileID == "" || b.ErrorFileID != "" || b.CompletedAt == 0 || b.ExpiresAt == 0 {
		t.Fatalf("completed: %s", b.RawJSON())
	}
	resp, err := client.Files.Content(ctx, b.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 4 {
		t.Fatalf("output: %s", out)
	}
	var rec batch.Record
	json.Unmarshal([]byte(strings.SplitN(string(out), "\n", 2)[0]), &rec)
	var cc openai.ChatCompletion
	if err := json.Unmarshal(rec.Response.Body, &cc); err != nil || len(cc.Choices) != 1 || cc.Object != "chat.completion" {
		t.Fatalf("an output body the client cannot read: %s (%v)", rec.Response.Body, err)
	}
	page, err := client.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(10)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID || page.HasMore {
		t.Fatalf("list: %v %v", page, err)
	}
	files, err := client.Files.List(ctx, openai.FileListParams{Purpose: openai.String("batch_output")})
	if err != nil || len(files.Data) != 1 || files.Data[0].ID != b.OutputFileID {
		t.Fatalf("files: %v %v", files, err)
	}
	var apiErr *openai.Error
	_, err = client.Batches.Cancel(ctx, b.ID)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "'completed'") {
		t.Fatalf("cancel a completed batch: %v", err)
	}
	_, err = client.Batches.Get(ctx, "batch_nope")
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown batch: %v", err)
	}
	if del, err := client.Files.Delete(ctx, f.ID); err != nil || !del.Deleted || del.ID != f.ID {
		t.Fatalf("delete: %+v %v", del, err)
	}
	if _, err := client.Files.Get(ctx, f.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("deleted file: %v", err)
	}
}

// Bad requests to the batch API get OpenAI's error shape; the server goes
// on serving. Without a data directory the API says it is off.
func TestBatchesBadInput(t *testing.T) {
	st := startStack(t, app.Options{DataDir: t.TempDir()})
	base := st.URL()
	status, body := uploadBatchFile(t, base, "batch", "{\"prompt\":\"x\"}\n")
	var file struct{ ID string }
	if status != 200 || json.Unmarshal(body, &file) != nil {
		t.Fatalf("upload: %d %s", status, body)
	}
	good := func() map[string]any {
		return map[string]any{"input_file_id": file.ID, "endpoint": "/v1/completions", "completion_window": "24h"}
	}
	for _, c := range []struct {
		name, method, path string
		body               []byte
		header             map[string]string
		status             int
		param              string
	}{
		{"malformed JSON", "POST", "/v1/batches", []byte(`{"input_file_id": `), nil, 400, ""},
		{"not an object", "POST", "/v1/batches", []byte(`[1]`), nil, 400, ""},
		{"endpoint", "POST", "/v1/batches", marshalBody(t, edited(good(), set("endpoint", "/v1/moderations"))), nil, 400, "endpoint"},
		{"window", "POST", "/v1/batches", marshalBody(t, edited(good(), set("completion_window", "1h"))), nil, 400, "completion_window"},
		{"metadata type", "POST", "/v1/batches", marshalBody(t, edited(good(), set("metadata", map[string]any{"a": 1}))), nil, 400, "metadata"},
		{"unknown input", "POST", "/v1/batches", marshalBody(t, edited(good(), set("input_file_id", "file-nope"))), nil, 404, ""},
		{"unknown batch", "GET", "/v1/batches/batch_nope", nil, nil, 404, ""},
		{"cancel unknown", "POST", "/v1/batches/batch_nope/cancel", nil, nil, 404, ""},
		{"cancel with garbage", "POST", "/v1/batches/batch_nope/cancel", []byte("{"), nil, 400, ""},
		{"unknown file", "GET", "/v1/files/file-nope", nil, nil, 404, ""},
		{"odd id", "GET", "/v1/files/file%20x%2F/content", nil, nil, 404, ""},
		{"unknown content", "GET", "/v1/files/file-nope/content", nil, nil, 404, ""},
		{"delete unknown", "DELETE", "/v1/files/file-nope", nil, nil, 404, ""},
		{"upload as JSON", "POST", "/v1/files", []byte(`{"purpose":"batch"}`), nil, 400, ""},
		{"limit", "GET", "/v1/batches?limit=x", nil, nil, 400, "limit"},
		{"limit 0", "GET", "/v1/batches?limit=0", nil, nil, 400, "limit"},
		{"after unknown", "GET", "/v1/batches?after=batch_nope", nil, nil, 400, "after"},
		{"wrong method", "PUT", "/v1/batches", nil, nil, 405, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := sendBody(t, c.method, base+c.path, c.body, c.header)
			expectError(t, "openai", status, c.status, body, func(e apiErrorBody) string {
				if c.param != "" && e.Param != c.param {
					return fmt.Sprintf("param %q, want %q", e.Param, c.param)
				}
				return ""
			})
		})
	}
	for _, purpose := range []string{"fine-tune", "", "batch_output"} {
		status, body := uploadBatchFile(t, base, purpose, "{}\n")
		expectError(t, "openai", status, 400, body, openaiParam("purpose"))
	}
	// A path climbing out of /v1/files is normalized before routing: it
	// reaches no file.
	status, body = sendBody(t, "GET", base+"/v1/files/..%2F..%2Fbatches%2Fx/content", nil, nil)
	expectError(t, "llamacpp", status, 404, body, nil)
	// A duplicate custom_id: created, and failed, as OpenAI does.
	status, body = uploadBatchFile(t, base, "batch", "{\"custom_id\":\"a\",\"prompt\":\"x\"}\n{\"custom_id\":\"a\",\"prompt\":\"y\"}\n")
	json.Unmarshal(body, &file)
	status, body = sendBody(t, "POST", base+"/v1/batches", marshalBody(t, good()), nil)
	var failed struct {
		Status string
		Errors struct {
			Object string
			Data   []struct {
				Code string
				Line int
			}
		}
	}
	if json.Unmarshal(body, &failed); status != 200 || failed.Status != "failed" || failed.Errors.Object != "list" || len(failed.Errors.Data) != 1 ||
		failed.Errors.Data[0].Code != "duplicate_custom_id" || failed.Errors.Data[0].Line != 2 {
		t.Fatalf("duplicate custom_id: %d %s", status, body)
	}
	if status, body := sendBody(t, "POST", base+"/v1/completions", marshalBody(t, completionsBody("still there?")), nil); status != 200 {
		t.Fatalf("after the bad input: %d %s", status, body)
	}

	off := startStack(t, app.Options{})
	for _, path := range []string{"/v1/batches", "/v1/files", "/v1/batches/batch_x"} {
		status, body := sendBody(t, "GET", off.URL()+path, nil, nil)
		expectError(t, "openai", status, 404, body, func(e apiErrorBody) string {
			if e.Code != "batch_api_off" || !strings.Contains(e.Message, "data directory") {
				return fmt.Sprintf("%+v does not say the batch API is off", e)
			}
			return ""
		})
	}
}

func edited(m map[string]any, edit func(map[string]any)) map[string]any {
	edit(m)
	return m
}
