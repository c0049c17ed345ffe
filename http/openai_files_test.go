package http

import (
	"fmt"
	"strings"
	"testing"

	"superfluid/batches"
	"superfluid/http/wire"
)

// An upload past the files' bound is a 413 in OpenAI's shape naming file:
// a 4xx, which OpenAI's clients do not retry.
func TestFilesQuotaIsA413(t *testing.T) {
	e, ok := batchError(fmt.Errorf("batches: writing: %w", &batches.QuotaError{Limit: 100, Used: 90})).(*wire.Error)
	if !ok || e.Status != 413 || e.Param != "file" || e.Type != "invalid_request_error" || !strings.Contains(e.Msg, "--max-files-bytes") {
		t.Fatalf("%#v", e)
	}
}
