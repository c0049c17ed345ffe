package app

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"superfluid/engine"
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

// View lists what the prefix cache holds, by tier (resident, host,
// parked), for status endpoints. Any goroutine.
func (m cacheMetrics) View() []kv.Entry { return m.c.View() }

// Stats are the cache's live counters, for the live status. Any goroutine.
func (m cacheMetrics) Stats() *kv.Stats { return m.c.Stats() }

// ParkInfo describes the disk tier, for /props. Any goroutine.
func (m cacheMetrics) ParkInfo() kv.ParkInfo { return m.c.ParkInfo() }

// Pin keeps a prompt prefix resident for ttl (Anthropic's cache_control
// breakpoints). Any goroutine.
func (m cacheMetrics) Pin(prefix []engine.Token, ttl time.Duration) { m.c.Pin(prefix, ttl) }

// Pins is how many pins are live. Any goroutine.
func (m cacheMetrics) Pins() int { return m.c.Pins() }

func parkIdle(o Options, ps *park.Store) time.Duration {
	if ps == nil {
		return 0
	}
	return o.ParkIdle
}
