package app

import (
	"log/slog"
	"path/filepath"

	"superfluid/respstore"
)

// openResponses opens the Responses API's store in o.DataDir/responses.
// Without a data directory, or with one that cannot be used, the server
// keeps its responses in memory (bounded), as long as it runs.
func (s *Stack) openResponses(o Options) {
	if o.DataDir == "" {
		return
	}
	dir := filepath.Join(o.DataDir, "responses")
	st, err := respstore.Open(dir, respstore.Options{MaxBytes: o.Disk.ResponsesBytes, MaxRecordBytes: o.Disk.ResponseBytes})
	if err != nil {
		slog.Warn("stored responses are kept in memory only", "dir", dir, "err", err)
		return
	}
	s.Server.SetResponses(st)
}
