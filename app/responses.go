package app

import (
	"log/slog"
	"path/filepath"

	"superfluid/http/wire"
	"superfluid/respstore"
	"superfluid/session"
)

// openResponses opens the Responses API's store in o.DataDir/responses
// and the conversations' in o.DataDir/sessions. Without a data directory,
// or with one that cannot be used, the server keeps them in memory
// (bounded), as long as it runs.
func (s *Stack) openResponses(o Options) {
	if o.DataDir == "" {
		return
	}
	dir := filepath.Join(o.DataDir, "responses")
	st, err := respstore.Open(dir, respstore.Options{MaxBytes: o.Disk.ResponsesBytes, MaxRecordBytes: o.Disk.ResponseBytes})
	if err != nil {
		slog.Warn("stored responses are kept in memory only", "dir", dir, "err", err)
	} else {
		s.Server.SetResponses(st)
	}
	dir = filepath.Join(o.DataDir, "sessions")
	ss, err := session.Open(dir, session.Options{MaxBytes: o.Disk.ConversationsBytes})
	if err != nil {
		slog.Warn("conversations are kept in memory only", "dir", dir, "err", err)
		return
	}
	s.sessions = ss
	s.Server.SetSessions(ss)
}

// closeSessions closes the conversation store once no request can write
// to it (after the HTTP drain).
func (s *Stack) closeSessions() {
	if s.sessions == nil {
		return
	}
	if err := s.sessions.Close(); err != nil {
		slog.Warn("closing the conversation store", "err", err)
	}
}

// restorePins pins again, in the resident model's cache, the pins its
// requests made before a restart (Anthropic's cache_control) that are
// still live: at most half its context of tokens, as the seeds' pin
// budget leaves the other half to the requests that bring nothing pinned.
func (s *Stack) restorePins() {
	if s.sessions == nil || s.Model == nil {
		return
	}
	p, ok := s.Model.Cache.(wire.CachePinner)
	if !ok {
		return
	}
	if n := s.Server.RestorePins(p, s.Model.Desc.Identity, s.Model.Desc.Ctx/2); n > 0 {
		slog.Info("cache pins restored", "model", s.Model.Name, "pins", n)
	}
}
