package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sfhttp "superfluid/http"
	"superfluid/pull"
)

// DiskQuotas bound what requests may leave on disk: the files of the batch
// API, the stored responses, and a model pulled through /api/pull. 0 takes
// each default, < 0 is unbounded.
type DiskQuotas struct {
	FilesBytes     int64 // /v1/files, uploads and batch outputs together (batches.DefaultMaxFilesBytes)
	ResponsesBytes int64 // the stored responses together; the oldest go first (respstore.DefaultMaxBytes)
	ResponseBytes  int64 // one stored response (respstore.DefaultMaxRecordBytes)
	// ConversationsBytes: the conversations' live state (session.Options.MaxBytes,
	// session.DefaultMaxBytes).
	ConversationsBytes int64
	PullBytes          int64 // one model pulled (DefaultMaxPullBytes)
}

// DefaultMaxPullBytes bounds a model pulled through the API: above any
// single GGUF file Hugging Face can hold (50 GB a file; larger models are
// split) and the large Ollama blobs, it stops a source that never ends
// from filling the disk.
const DefaultMaxPullBytes = 256 << 30

// modelStore is the models directory behind Ollama's /api/pull,
// /api/delete and the listing of /api/tags (sfhttp.ModelStore), over
// package pull: the same names, files and verification as `superfluid pull`.
type modelStore struct {
	dir string
	// served are the files of the resident models (--model,
	// --fim-model): never deleted under the server.
	served []string
	// unload, when set, unloads another loaded model before its files go;
	// its error refuses the delete.
	unload func(name string) error
	// maxPull bounds a file pulled; ≤ 0: none.
	maxPull int64
}

// openModelStore gives the server o.ModelsDir, when there is one.
func (s *Stack) openModelStore(o Options) {
	if o.ModelsDir == "" {
		return
	}
	served := []string{o.ModelPath, o.FIMModelPath}
	for _, sp := range o.Models {
		served = append(served, sp.Path)
	}
	maxPull := o.Disk.PullBytes
	if maxPull == 0 {
		maxPull = DefaultMaxPullBytes
	}
	s.Server.SetModelStore(&modelStore{dir: o.ModelsDir, served: served, unload: s.Models.Unload, maxPull: maxPull})
}

func (m *modelStore) Pull(ctx context.Context, name string, progress func(sfhttp.PullProgress)) error {
	if _, err := pull.ParseRef(name); err != nil {
		return fmt.Errorf("%w: %v", sfhttp.ErrBadModelName, err)
	}
	progress(sfhttp.PullProgress{Phase: sfhttp.PullResolving})
	res, err := pull.Pull(ctx, name, pull.Options{Dir: m.dir, MaxBytes: m.maxPull, OnProgress: func(p pull.Progress) { progress(pullProgress(p)) }})
	if err != nil {
		return err
	}
	if res.UpToDate { // nothing was downloaded: say the file is whole
		progress(sfhttp.PullProgress{Phase: sfhttp.PullDownloading, File: filepath.Base(res.Path), SHA256: res.SHA256, Total: res.Size, Completed: res.Size})
	}
	slog.Info("pulled", "model", res.Name, "source", res.Source, "bytes", res.Size, "up_to_date", res.UpToDate, "resumed", res.Resumed)
	return nil
}

func pullProgress(p pull.Progress) sfhttp.PullProgress {
	out := sfhttp.PullProgress{Phase: sfhttp.PullDownloading, File: p.Name, SHA256: p.SHA256, Total: max(p.Total, 0), Completed: p.Done}
	switch p.Stage {
	case pull.Verifying:
		out.Phase = sfhttp.PullVerifying
	case pull.Saving:
		out.Phase = sfhttp.PullWriting
	}
	return out
}

// Delete removes a model of the directory, found by its name or by the
// reference it was pulled from, with its manifest and partial download.
// A resident model (--model, --fim-model) is refused; one loaded on
// demand is unloaded first.
func (m *modelStore) Delete(_ context.Context, name string) error {
	path, err := pull.Find(m.dir, name)
	switch {
	case errors.Is(err, pull.ErrBadName):
		return fmt.Errorf("%w: %v", sfhttp.ErrBadModelName, err)
	case errors.Is(err, pull.ErrNotFound):
		return fmt.Errorf("%w: %v", sfhttp.ErrModelNotFound, err)
	case err != nil:
		return err
	}
	if slices.ContainsFunc(m.served, func(p string) bool { return sameFile(path, p) }) {
		return fmt.Errorf("%w: %s is a model this server was started with (--model, --fim-model); stop the server to delete it", sfhttp.ErrModelInUse, name)
	}
	local := strings.TrimSuffix(filepath.Base(path), pull.Ext)
	if m.unload != nil {
		if err := m.unload(local); err != nil {
			return fmt.Errorf("%w: unloading %s: %v", sfhttp.ErrModelInUse, local, err)
		}
	}
	if err := pull.Remove(path); errors.Is(err, pull.ErrPulling) {
		return fmt.Errorf("%w: %v", sfhttp.ErrModelInUse, err)
	} else if err != nil {
		return err
	}
	slog.Info("deleted a model", "model", local, "path", path)
	return nil
}

func (m *modelStore) List(context.Context) ([]sfhttp.StoredModel, error) {
	entries, err := pull.List(m.dir)
	out := make([]sfhttp.StoredModel, len(entries))
	for i, e := range entries {
		out[i] = sfhttp.StoredModel{Name: e.Name, Path: e.Path, Size: e.Size, Modified: e.Modified, SHA256: e.SHA256}
	}
	return out, err
}

// sameFile reports whether two paths name one file (through links too).
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
