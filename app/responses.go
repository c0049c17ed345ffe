package app

import (
	"log/slog"
	"path/filepath"

	sfhttp "superfluid/http"
	"superfluid/http/wire"
	"superfluid/respstore"
	"superfluid/session"
)

// openResponses opens the Responses API's store in o.DataDir/responses,
// its chains' in o.DataDir/chains and the conversations' in
// o.DataDir/sessions. Without a data directory, or with one that cannot
// be used, the server keeps its responses in memory (bounded, each with
// its whole conversation), as long as it runs, and has no conversations.
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
	// The stored responses' chains: their items, each written once,
	// kept as long and as bounded as the responses.
	dir = filepath.Join(o.DataDir, "chains")
	cs, err := session.Open(dir, session.Options{MaxBytes: o.Disk.ResponsesBytes, Retention: respstore.DefaultTTL})
	if err != nil {
		slog.Warn("stored responses hold their whole conversations", "dir", dir, "err", err)
	} else {
		s.chains = cs
		s.Server.SetChains(cs)
	}
	dir = filepath.Join(o.DataDir, "sessions")
	ss, err := session.Open(dir, session.Options{MaxBytes: o.Disk.ConversationsBytes})
	if err != nil {
		slog.Warn("conversations are off", "dir", dir, "err", err)
		return
	}
	s.sessions = ss
	s.Server.SetSessions(ss)
}

// closeSessions closes the conversation and chain stores once no request
// can write to them (after the HTTP drain).
func (s *Stack) closeSessions() {
	for _, st := range []*session.Store{s.sessions, s.chains} {
		if st == nil {
			continue
		}
		if err := st.Close(); err != nil {
			slog.Warn("closing a session store", "err", err)
		}
	}
}

// restorePins pins again, in each loaded model's cache, the pins its
// requests made before a restart (Anthropic's cache_control) that are
// still live, and has the registry do so for each model it loads later.
func (s *Stack) restorePins() {
	if s.sessions == nil || s.Models == nil {
		return
	}
	for _, lm := range s.Models.Loaded() {
		s.restorePinsOf(lm.Model)
	}
	s.Models.onLoad = s.restorePinsOf
}

// restorePinsOf restores m's pins: at most half its context of tokens, as
// the seeds' pin budget leaves the other half to the requests that bring
// nothing pinned.
func (s *Stack) restorePinsOf(m *sfhttp.Model) {
	p, ok := m.Cache.(wire.CachePinner)
	if !ok || m.Desc == nil {
		return
	}
	if n := s.Server.RestorePins(p, m.Desc.Identity, m.Desc.Ctx/2); n > 0 {
		slog.Info("cache pins restored", "model", m.Name, "pins", n)
	}
}
