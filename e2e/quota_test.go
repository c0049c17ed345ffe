package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"superfluid/app"
)

// The disk quotas on the real stack: an upload that would take the batch
// API's files past app.DiskQuotas.FilesBytes is a 413 in OpenAI's shape
// naming file, the server goes on serving, and a delete makes room.
func TestFilesQuotaOnTheRealStack(t *testing.T) {
	st := startStack(t, app.Options{DataDir: t.TempDir(), Disk: app.DiskQuotas{FilesBytes: 4096}})
	base := st.URL()
	line := "{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"x\"}}\n"
	status, body := uploadBatchFile(t, base, "batch", strings.Repeat(line, 30)) // about 2.5 KB
	var first struct{ ID string }
	if status != 200 || json.Unmarshal(body, &first) != nil {
		t.Fatalf("first upload: %d %s", status, body)
	}
	status, body = uploadBatchFile(t, base, "batch", strings.Repeat(line, 30))
	expectError(t, "openai", status, 413, body, openaiParam("file"))
	if !strings.Contains(string(body), "--max-files-bytes") {
		t.Errorf("the refusal does not say how to raise the bound: %s", body)
	}
	if status, body := sendBody(t, "DELETE", base+"/v1/files/"+first.ID, nil, nil); status != 200 {
		t.Fatalf("delete: %d %s", status, body)
	}
	if status, body := uploadBatchFile(t, base, "batch", strings.Repeat(line, 30)); status != 200 {
		t.Fatalf("an upload after a delete made room: %d %s", status, body)
	}
}
