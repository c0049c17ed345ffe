package kv

import "superfluid/metric"

// The prefix cache's metrics, defined once; the counters stay the atomics
// in Stats, read at scrape time.
var (
	hitsTotal              = metric.Counter("superfluid_cache_hits_total", "Admissions that found a cached prefix.")
	missesTotal            = metric.Counter("superfluid_cache_misses_total", "Admissions that found nothing cached.")
	warmTokensTotal        = metric.Counter("superfluid_cache_warm_tokens_total", "Prompt tokens served from the cache.")
	hostHitsTotal          = metric.Counter("superfluid_cache_host_hits_total", "Prefixes restored from host memory.")
	hostTailsTotal         = metric.Counter("superfluid_cache_host_tails_total", "Streams of which only the part past a prefix the pool keeps (an edit's, a shared one) went to host memory.")
	hostTailsLostTotal     = metric.Counter("superfluid_cache_host_tails_lost_total", "Tails in host memory dropped: the prefix they continue no longer cached, or no sequence free to put them together for disk.")
	evictionsTotal         = metric.Counter("superfluid_cache_evictions_total", "Cache entries evicted from the KV pool.")
	checkpointResumesTotal = metric.Counter("superfluid_cache_checkpoint_resumes_total", "Prefixes resumed from a checkpoint of partial state (sliding-window or recurrent models).")
	cutRefusalsTotal       = metric.Counter("superfluid_cache_cut_refusals_total", "Cached prefixes the model's state could not be cut to, served shorter or cold.")
	checkpointBytesCopied  = metric.Counter("superfluid_cache_checkpoint_bytes_copied_total", "Bytes of checkpoints copied out of the engine as lanes retired (only those the cache keeps).")
	seedMismatchesTotal    = metric.Counter("superfluid_cache_seed_mismatches_total", "Seeded sequences that did not hold the cached prefix, admitted cold.")
	entriesGauge           = metric.Gauge("superfluid_cache_entries", "Cached conversations by tier.", "tier")
	residentTokens         = metric.Gauge("superfluid_cache_resident_tokens", "Tokens cached entries hold in the KV pool.")
	hostBytes              = metric.Gauge("superfluid_cache_host_bytes", "Bytes of conversation state in host memory.")

	// The disk tier as the cache sees it; the park package adds its own.
	parkRestoresTotal       = metric.Counter("superfluid_park_restores_total", "Warm prefixes restored from the park directory.")
	parkRestoreFailures     = metric.Counter("superfluid_park_restore_failures_total", "Restores that fell back to a cold prefill.")
	parkRestoreSecondsTotal = metric.Counter("superfluid_park_restore_seconds_total", "Time successful restores took (read, verify, decompress, import).")
	parkRestoreLastSeconds  = metric.Gauge("superfluid_park_restore_last_seconds", "The last restore's time.")
	parkIdleTotal           = metric.Counter("superfluid_park_idle_total", "Conversations parked and evicted after their keep-alive.")
	parkLossy               = metric.Gauge("superfluid_park_lossy", "1 when parked state is demoted to 8 bits (outputs of resumed conversations may differ).")
)

// AddMetrics adds the cache's samples to a scrape, and the disk tier's
// when it is on. Any goroutine.
func (c *Cache) AddMetrics(p *metric.Page) {
	st := c.Stats()
	p.Add(hitsTotal, float64(st.Hits.Load()))
	p.Add(missesTotal, float64(st.Misses.Load()))
	p.Add(warmTokensTotal, float64(st.WarmTokens.Load()))
	p.Add(hostHitsTotal, float64(st.HostHits.Load()))
	p.Add(evictionsTotal, float64(st.Evictions.Load()))
	p.Add(hostTailsTotal, float64(st.HostTails.Load()))
	p.Add(hostTailsLostTotal, float64(st.HostTailsLost.Load()))
	p.Add(checkpointResumesTotal, float64(st.CheckpointResumes.Load()))
	p.Add(cutRefusalsTotal, float64(st.CutRefusals.Load()))
	p.Add(checkpointBytesCopied, float64(st.CheckpointBytesCopied.Load()))
	p.Add(seedMismatchesTotal, float64(st.SeedMismatches.Load()))
	p.Add(entriesGauge, float64(st.Entries.Load()), "resident")
	p.Add(entriesGauge, float64(st.HostEntries.Load()), "host")
	p.Add(entriesGauge, float64(st.ParkedEntries.Load()), "parked")
	p.Add(residentTokens, float64(st.ResidentTokens.Load()))
	p.Add(hostBytes, float64(st.HostBytes.Load()))

	ps := c.ParkStats()
	if ps == nil {
		return
	}
	ps.AddTo(p)
	p.Add(parkRestoresTotal, float64(st.ParkHits.Load()))
	p.Add(parkRestoreFailures, float64(st.ParkFailures.Load()))
	p.Add(parkRestoreSecondsTotal, float64(st.ParkRestoreNanos.Load())/1e9)
	p.Add(parkRestoreLastSeconds, float64(st.ParkRestoreLastNanos.Load())/1e9)
	p.Add(parkIdleTotal, float64(st.IdleParks.Load()))
	lossy := 0.0
	if c.ParkInfo().Lossy {
		lossy = 1
	}
	p.Add(parkLossy, lossy)
}
