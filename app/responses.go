package app

import (
	"log/slog"
	"path/filepath"

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
