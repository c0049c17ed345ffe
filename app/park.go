package app

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"superfluid/engine"
	sfhttp "superfluid/http"
	"superfluid/kv"
	"superfluid/park"
)

// checkParkOptions refuses, before the model loads, what cannot work:
// lossy parking demotes f16 KV data to 8 bits, so another KV type has
// nothing to demote, and pretending otherwise would misreport /props.
func checkParkOptions(o Options) error {
	if o.ParkDir != "" && o.ParkLossy {
		return checkLossyCacheTypes(cmp.Or(o.CacheTypeK, "f16"), cmp.Or(o.CacheTypeV, "f16"))
	}
	return nil
}

func checkLossyCacheTypes(typeK, typeV string) error {
	if typeK != "f16" || typeV != "f16" {
		return fmt.Errorf("app: --park-lossy demotes an f16 KV cache to 8 bits; the K cache is %s and the V cache %s, which have nothing to demote", typeK, typeV)
	}
	return nil
}

// openPark opens the park directory for the loaded model; nil when parking
// is off. A directory that cannot be used (not creatable, a regular file,
// held by another server) is logged and serving goes on without the disk
// tier; asking for lossy parking of a cache with nothing to demote is an
// error the user must fix.
func openPark(o Options, desc *engine.Descriptor) (*park.Store, error) {
	if o.ParkDir == "" {
		if o.ParkLossy || o.ParkEager || o.ParkIdle > 0 {
			slog.Warn("park settings given with parking off; ignored")
		}
		return nil, nil
	}
	if o.ParkLossy {
		if err := checkLossyCacheTypes(desc.CacheTypeK, desc.CacheTypeV); err != nil {
			return nil, err
		}
	}
	budget := o.ParkBudget
	if budget == 0 {
		budget = 8 << 30
	}
	st, err := park.Open(park.Config{Dir: o.ParkDir, Identity: desc.Identity, KVType: desc.CacheTypeK, VType: desc.CacheTypeV, VLayout: parkVLayout(o, desc),
		Budget: max(budget, 0), Lossy: o.ParkLossy})
	if err != nil {
		slog.Warn("parking conversations on disk is off", "dir", o.ParkDir, "err", err)
		return nil, nil
	}
	s := st.Stats()
	slog.Info("park directory indexed", "dir", st.Dir(), "files", s.Files.Load(), "bytes", s.Bytes.Load(),
		"refused", refusedTotal(s), "stale_temps", s.StaleTemps.Load(), "migrated", s.Migrated.Load(),
		"other_models", s.Foreign.Load(), "lossy", o.ParkLossy)
	return st, nil
}

// parkVLayout is the V cache layout of the engine's KV state, part of a
// park file's identity: llama.cpp transposes V unless flash attention
// runs. --flash-attn off turns it off, and llama.cpp turns it off for
// Grok whatever is asked. "auto" resolves inside llama.cpp to on unless
// some layer's attention would run on another device than its KV cache
// (a GPU without support): on the CPU build it is always on, and a
// quantized V cache forces it on (native/engine.cpp). Where the guess is
// wrong, the park writer reads the layout from each exported state and
// refuses to park it under the wrong one (a counted write error, warned
// once), so no file ever claims a layout its state does not have.
func parkVLayout(o Options, desc *engine.Descriptor) park.VLayout {
	if o.FlashAttn == "off" || desc.Architecture == "grok" {
		return park.VTransposed
	}
	return park.VRows
}

func refusedTotal(s *park.Stats) int64 {
	var n int64
	for r := range park.NumReasons {
		n += s.Refused[r].Load()
	}
	return n
}

// parkMetrics are the disk tier's samples for /metrics; none when it is off.
func parkMetrics(c *kv.Cache) []sfhttp.Metric {
	ps := c.ParkStats()
	if ps == nil {
		return nil
	}
	st := c.Stats()
	lossy := 0.0
	if c.ParkInfo().Lossy {
		lossy = 1
	}
	counter := func(name, help string, v int64) sfhttp.Metric {
		return sfhttp.Metric{Name: name, Help: help, Type: "counter", Value: float64(v)}
	}
	gauge := func(name, help string, v float64) sfhttp.Metric {
		return sfhttp.Metric{Name: name, Help: help, Type: "gauge", Value: v}
	}
	ms := []sfhttp.Metric{
		counter("park_writes_total", "Conversations written to the park directory.", ps.Parks.Load()),
		counter("park_lossy_writes_total", "Of which demoted to 8 bits.", ps.LossyParks.Load()),
		{Name: "park_dropped_writes_total", Help: "Park writes dropped.", Type: "counter", Labels: `reason="queue_full"`, Value: float64(ps.Dropped.Load())},
		{Name: "park_dropped_writes_total", Help: "Park writes dropped.", Type: "counter", Labels: `reason="over_budget"`, Value: float64(ps.TooBig.Load())},
		counter("park_write_errors_total", "Park writes that failed (directory unwritable or full); serving is unaffected.", ps.WriteErrors.Load()),
		counter("park_state_bytes_total", "KV state bytes parked.", ps.BytesRaw.Load()),
		counter("park_written_bytes_total", "File bytes written for them.", ps.BytesFile.Load()),
		gauge("park_compression_ratio", "File bytes over KV state bytes, everything parked so far.", ps.Ratio()),
		counter("park_restores_total", "Warm prefixes restored from the park directory.", st.ParkHits.Load()),
		counter("park_restore_failures_total", "Restores that fell back to a cold prefill.", st.ParkFailures.Load()),
		counter("park_read_bytes_total", "File bytes read by restores.", ps.LoadBytes.Load()),
		{Name: "park_restore_seconds_total", Help: "Time successful restores took (read, verify, decompress, import).", Type: "counter", Value: float64(st.ParkRestoreNanos.Load()) / 1e9},
		gauge("park_restore_last_seconds", "The last restore's time.", float64(st.ParkRestoreLastNanos.Load())/1e9),
		counter("park_idle_total", "Conversations parked and evicted after their keep-alive.", st.IdleParks.Load()),
		counter("park_swept_total", "Files removed to keep the directory under budget.", ps.Swept.Load()),
		counter("park_superseded_total", "Files removed because the conversation's next turn was parked.", ps.Superseded.Load()),
		counter("park_stale_temps_total", "Half-written files of interrupted writes removed at start-up.", ps.StaleTemps.Load()),
		counter("park_migrated_total", "Files of the flat park directory layout moved into this model's subdirectory at start-up.", ps.Migrated.Load()),
		gauge("park_other_model_files", "Files left in the flat park directory layout at start-up: other models', KV types' or V layouts', or unreadable.", float64(ps.Foreign.Load())),
		counter("park_reads_total", "Park files opened for a restore, whatever came of it (a refused file is read once).", ps.Reads.Load()),
		gauge("park_files", "Park files on disk.", float64(ps.Files.Load())),
		gauge("park_bytes", "Bytes of park files on disk.", float64(ps.Bytes.Load())),
		gauge("park_lossy", "1 when parked state is demoted to 8 bits (outputs of resumed conversations may differ).", lossy),
	}
	for r := range park.NumReasons {
		ms = append(ms, sfhttp.Metric{Name: "park_refused_total", Help: "Park files refused (removed when damaged, left alone when another model's or build's), by reason.", Type: "counter",
			Labels: fmt.Sprintf("reason=%q", r.String()), Value: float64(ps.Refused[r].Load())})
	}
	return ms
}

// View lists what the prefix cache holds, by tier (resident, host,
// parked), for status endpoints. Any goroutine.
func (m cacheMetrics) View() []kv.Entry { return m.c.View() }

// ParkInfo describes the disk tier, for /props. Any goroutine.
func (m cacheMetrics) ParkInfo() kv.ParkInfo { return m.c.ParkInfo() }

// Pin keeps a prompt prefix resident for ttl (Anthropic's cache_control
// breakpoints). Any goroutine.
func (m cacheMetrics) Pin(prefix []engine.Token, ttl time.Duration) { m.c.Pin(prefix, ttl) }

func parkIdle(o Options, ps *park.Store) time.Duration {
	if ps == nil {
		return 0
	}
	return o.ParkIdle
}
