package park

import "superfluid/metric"

// The park writer's and reader's metrics, defined once; the counters stay
// the atomics in Stats, read at scrape time.
var (
	writesTotal       = metric.Counter("superfluid_park_writes_total", "Conversations written to the park directory.")
	lossyWritesTotal  = metric.Counter("superfluid_park_lossy_writes_total", "Of which demoted to 8 bits.")
	droppedTotal      = metric.Counter("superfluid_park_dropped_writes_total", "Park writes dropped.", "reason")
	writeErrorsTotal  = metric.Counter("superfluid_park_write_errors_total", "Park writes that failed (directory unwritable or full); serving is unaffected.")
	stateBytesTotal   = metric.Counter("superfluid_park_state_bytes_total", "KV state bytes parked.")
	writtenBytesTotal = metric.Counter("superfluid_park_written_bytes_total", "File bytes written for them.")
	compressionRatio  = metric.Gauge("superfluid_park_compression_ratio", "File bytes over KV state bytes, everything parked so far.")
	readBytesTotal    = metric.Counter("superfluid_park_read_bytes_total", "File bytes read by restores.")
	sweptTotal        = metric.Counter("superfluid_park_swept_total", "Files removed to keep the directory under budget.")
	supersededTotal   = metric.Counter("superfluid_park_superseded_total", "Files removed because the conversation's next turn was parked.")
	staleTempsTotal   = metric.Counter("superfluid_park_stale_temps_total", "Half-written files of interrupted writes removed at start-up.")
	migratedTotal     = metric.Counter("superfluid_park_migrated_total", "Files of the flat park directory layout moved into this model's subdirectory at start-up.")
	otherModelFiles   = metric.Gauge("superfluid_park_other_model_files", "Files left in the flat park directory layout at start-up: other models', KV types' or V layouts', or unreadable.")
	readsTotal        = metric.Counter("superfluid_park_reads_total", "Park files opened for a restore, whatever came of it (a refused file is read once).")
	filesGauge        = metric.Gauge("superfluid_park_files", "Park files on disk.")
	bytesGauge        = metric.Gauge("superfluid_park_bytes", "Bytes of park files on disk.")
	refusedTotal      = metric.Counter("superfluid_park_refused_total", "Park files refused (removed when damaged, left alone when another model's or build's), by reason.", "reason")
)

// AddTo adds the park directory's samples to a scrape.
func (s *Stats) AddTo(p *metric.Page) {
	p.Add(writesTotal, float64(s.Parks.Load()))
	p.Add(lossyWritesTotal, float64(s.LossyParks.Load()))
	p.Add(droppedTotal, float64(s.Dropped.Load()), "queue_full")
	p.Add(droppedTotal, float64(s.TooBig.Load()), "over_budget")
	p.Add(writeErrorsTotal, float64(s.WriteErrors.Load()))
	p.Add(stateBytesTotal, float64(s.BytesRaw.Load()))
	p.Add(writtenBytesTotal, float64(s.BytesFile.Load()))
	p.Add(compressionRatio, s.Ratio())
	p.Add(readBytesTotal, float64(s.LoadBytes.Load()))
	p.Add(sweptTotal, float64(s.Swept.Load()))
	p.Add(supersededTotal, float64(s.Superseded.Load()))
	p.Add(staleTempsTotal, float64(s.StaleTemps.Load()))
	p.Add(migratedTotal, float64(s.Migrated.Load()))
	p.Add(otherModelFiles, float64(s.Foreign.Load()))
	p.Add(readsTotal, float64(s.Reads.Load()))
	p.Add(filesGauge, float64(s.Files.Load()))
	p.Add(bytesGauge, float64(s.Bytes.Load()))
	for r := range NumReasons {
		p.Add(refusedTotal, float64(s.Refused[r].Load()), r.String())
	}
}
