package http

import "superfluid/http/wire"

// The models directory's types are wire's (wire.ModelStore), for the API
// package that serves it (http/ollama); app names them here.
type (
	ModelStore   = wire.ModelStore
	PullPhase    = wire.PullPhase
	PullProgress = wire.PullProgress
	StoredModel  = wire.StoredModel
)

var (
	ErrBadModelName = wire.ErrBadModelName
	ErrModelInUse   = wire.ErrModelInUse
)

const (
	PullResolving   = wire.PullResolving
	PullDownloading = wire.PullDownloading
	PullVerifying   = wire.PullVerifying
	PullWriting     = wire.PullWriting
)

// SetModelStore gives the server its models directory; without one,
// /api/pull and /api/delete answer that the server has none.
func (s *Server) SetModelStore(st ModelStore) { s.modelDir.Store(&st) }

func (s *Server) modelStore() ModelStore {
	if p := s.modelDir.Load(); p != nil {
		return *p
	}
	return nil
}
