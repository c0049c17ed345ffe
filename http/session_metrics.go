package http

import (
	"superfluid/metric"
	"superfluid/session"
)

// The session stores' metrics, labelled by store: "conversations" (the
// Conversations API's) and "chains" (the stored responses' items).
var (
	sessionRecords       = metric.Counter("superfluid_session_records_total", "Records written to a session store's log.", "store")
	sessionWrittenBytes  = metric.Counter("superfluid_session_written_bytes_total", "Bytes written to a session store's log.", "store")
	sessionFsyncs        = metric.Counter("superfluid_session_fsyncs_total", "Fsyncs of a session store's log, snapshot and directory.", "store")
	sessionGroups        = metric.Counter("superfluid_session_group_commits_total", "Group commits (one write and one fsync for the records of concurrent writers).", "store")
	sessionTornTails     = metric.Counter("superfluid_session_torn_tails_total", "Torn or corrupt log tails dropped when the store opened.", "store")
	sessionCompactions   = metric.Counter("superfluid_session_compactions_total", "Snapshots written, each beginning a fresh log.", "store")
	sessionExpired       = metric.Counter("superfluid_session_expired_total", "Conversations and pins dropped by retention or expiry.", "store")
	sessionLogBytes      = metric.Gauge("superfluid_session_log_bytes", "The size of a session store's log.", "store")
	sessionSnapshotBytes = metric.Gauge("superfluid_session_snapshot_bytes", "The size of a session store's snapshot.", "store")
	sessionLiveBytes     = metric.Gauge("superfluid_session_live_bytes", "A session store's live content, as its byte bound counts it.", "store")
	sessionConversations = metric.Gauge("superfluid_session_conversations", "Conversations a session store holds.", "store")
	sessionItems         = metric.Gauge("superfluid_session_items", "Distinct items a session store holds.", "store")
	sessionPins          = metric.Gauge("superfluid_session_pins", "Cache pin records a session store holds.", "store")
	sessionFailed        = metric.Gauge("superfluid_session_failed", "1 when a write error has stopped a session store.", "store")
)

// addSessionMetrics adds the server's session stores' counters.
func (s *Server) addSessionMetrics(p *metric.Page) {
	if st, err := s.responses.Sessions(); err == nil {
		addSessionStats(p, "conversations", st.Stats())
	}
	if st := s.responses.Chains(); st != nil {
		addSessionStats(p, "chains", st.Stats())
	}
}

func addSessionStats(p *metric.Page, store string, st session.Stats) {
	failed := 0.0
	if st.Failed != "" {
		failed = 1
	}
	for _, m := range []struct {
		def *metric.Def
		v   float64
	}{
		{sessionRecords, float64(st.Records)}, {sessionWrittenBytes, float64(st.Bytes)}, {sessionFsyncs, float64(st.Fsyncs)},
		{sessionGroups, float64(st.Groups)}, {sessionTornTails, float64(st.TornTails)}, {sessionCompactions, float64(st.Compactions)},
		{sessionExpired, float64(st.Expired)}, {sessionLogBytes, float64(st.LogBytes)}, {sessionSnapshotBytes, float64(st.SnapshotBytes)},
		{sessionLiveBytes, float64(st.LiveBytes)}, {sessionConversations, float64(st.Conversations)}, {sessionItems, float64(st.Items)},
		{sessionPins, float64(st.Pins)}, {sessionFailed, failed},
	} {
		p.Add(m.def, m.v, store)
	}
}
