package session

import "superfluid/metric"

// The store's metrics, defined once; Stats holds the values, read at
// scrape time.
var (
	recordsTotal      = metric.Counter("superfluid_sessions_log_records_total", "Records written to the session log.")
	logBytesTotal     = metric.Counter("superfluid_sessions_log_bytes_total", "Bytes written to the session log.")
	fsyncsTotal       = metric.Counter("superfluid_sessions_fsyncs_total", "fsyncs of the session log, snapshot and directory.")
	groupsTotal       = metric.Counter("superfluid_sessions_group_commits_total", "Group commits (one write and fsync each), by records carried (upper bound of the bucket).", "records")
	tornTailsTotal    = metric.Counter("superfluid_sessions_torn_tails_total", "Torn or corrupt log tails dropped at start-up.")
	tornBytesTotal    = metric.Counter("superfluid_sessions_torn_bytes_total", "Bytes of the dropped log tails.")
	compactionsTotal  = metric.Counter("superfluid_sessions_compactions_total", "Snapshots written, each beginning a fresh log.")
	expiredTotal      = metric.Counter("superfluid_sessions_expired_total", "Conversations and pins dropped by retention or expiry.")
	logBytesGauge     = metric.Gauge("superfluid_sessions_log_bytes", "The session log's size.")
	snapshotBytes     = metric.Gauge("superfluid_sessions_snapshot_bytes", "The session snapshot's size.")
	liveBytes         = metric.Gauge("superfluid_sessions_live_bytes", "The live sessions' estimated size, which the byte quota bounds.")
	conversationsLive = metric.Gauge("superfluid_sessions_conversations", "Live conversations.")
	itemsLive         = metric.Gauge("superfluid_sessions_items", "Distinct stored conversation items.")
	pinsLive          = metric.Gauge("superfluid_sessions_pins", "Recorded prefix-cache pins.")
	failedGauge       = metric.Gauge("superfluid_sessions_failed", "1 once a write error has stopped the session store's writes.")
)

// groupBounds are GroupSizes' buckets' upper bounds, as the label says them.
var groupBounds = [len(Stats{}.GroupSizes)]string{"1", "3", "7", "15", "31", "+Inf"}

// AddTo adds the store's samples to a scrape.
func (st *Stats) AddTo(p *metric.Page) {
	p.Add(recordsTotal, float64(st.Records))
	p.Add(logBytesTotal, float64(st.Bytes))
	p.Add(fsyncsTotal, float64(st.Fsyncs))
	for i, n := range st.GroupSizes {
		p.Add(groupsTotal, float64(n), groupBounds[i])
	}
	p.Add(tornTailsTotal, float64(st.TornTails))
	p.Add(tornBytesTotal, float64(st.TornBytes))
	p.Add(compactionsTotal, float64(st.Compactions))
	p.Add(expiredTotal, float64(st.Expired))
	p.Add(logBytesGauge, float64(st.LogBytes))
	p.Add(snapshotBytes, float64(st.SnapshotBytes))
	p.Add(liveBytes, float64(st.LiveBytes))
	p.Add(conversationsLive, float64(st.Conversations))
	p.Add(itemsLive, float64(st.Items))
	p.Add(pinsLive, float64(st.Pins))
	failed := 0
	if st.Failed != "" {
		failed = 1
	}
	p.Add(failedGauge, float64(failed))
}
