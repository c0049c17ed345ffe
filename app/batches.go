package app

import (
	"context"
	"log/slog"

	"superfluid/batch"
	"superfluid/batches"
)

// openBatches opens the batch API's store in o.DataDir and starts its
// worker. A directory that cannot be used (not creatable, held by another
// server) is logged and the server goes on with the batch API off, as
// with the park directory: serving matters more than batches.
func (s *Stack) openBatches(o Options) {
	if o.DataDir == "" {
		return
	}
	o.withDefaults() // o is a copy: this fills Lanes
	st, err := batches.Open(o.DataDir, batches.Config{Parallel: 2 * o.Lanes, MaxFilesBytes: o.Disk.FilesBytes})
	if err != nil {
		slog.Warn("the batch API is off", "dir", o.DataDir, "err", err)
		return
	}
	d := s.Doer("background")
	if o.WrapBatchDoer != nil {
		d = o.WrapBatchDoer(d)
	}
	st.Start(d)
	s.Batches = st
	s.Server.SetBatches(st)
	slog.Info("batch API on", "dir", o.DataDir)
}

// Doer runs batch requests through the request core, in class
// (Server.AnswerBatch): the model the line names, the same checks and
// scheduler as a client's request, without an HTTP request. The server's
// batches run in the background class, behind every interactive request;
// `superfluid batch` picks its class. A batch line is always a POST.
func (s *Stack) Doer(class string) batch.Doer {
	return batch.DoerFunc(func(ctx context.Context, _, url string, body []byte) (int, []byte, error) {
		return s.Server.AnswerBatch(ctx, url, body, class)
	})
}
