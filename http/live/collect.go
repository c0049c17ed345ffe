package live

import (
	"time"

	"superfluid/http/wire"
	"superfluid/kv"
	"superfluid/sched"
	"superfluid/status"
	"superfluid/task"
)

// laneScheduler is what the live status reads of a model's scheduler
// (sched.Scheduler; a test's stub scheduler has none of it, and its model
// shows no lanes).
type laneScheduler interface {
	Config() sched.Config
	Stats() sched.Snapshot
	Occupancy() sched.Occupancy
}

// tieredCache is what it reads of a model's prefix cache (kv.Cache behind
// the app's wrapper).
type tieredCache interface {
	View() []kv.Entry
	Stats() *kv.Stats
}

// collect builds the status of the models loaded at now; samples is the
// throughput ring's copy.
func collect(settings wire.Settings, loaded []wire.LoadedEntry, now time.Time, samples status.Throughput) status.Status {
	st := status.Status{
		Version: settings.Version, StartedAt: settings.Started, Now: now,
		UptimeSeconds: now.Sub(settings.Started).Seconds(),
		Models:        []status.Model{}, Lanes: []status.Lane{},
		Throughput: samples,
	}
	var queues [sched.NumClasses]sched.QueueView
	for _, e := range loaded {
		if e.Model == nil {
			continue
		}
		m := modelOf(e)
		if ls, ok := e.Model.Sched.(laneScheduler); ok {
			snap := ls.Stats()
			occ := ls.Occupancy()
			m.Lanes = ls.Config().Lanes
			m.LanesBusy = len(occ.Lanes)
			m.PromptTokens, m.GeneratedTokens, m.Preemptions = snap.PrefillTokens, snap.DecodeTokens, snap.Preemptions
			st.Preemptions += snap.Preemptions
			st.Lanes = append(st.Lanes, lanesOf(m.Name, m.Lanes, occ.Lanes, now)...)
			for c, q := range occ.Queues {
				queues[c].Waiting += q.Waiting
				if !q.Oldest.IsZero() && (queues[c].Oldest.IsZero() || q.Oldest.Before(queues[c].Oldest)) {
					queues[c].Oldest = q.Oldest
				}
			}
		}
		if tc, ok := e.PrefixCache.(tieredCache); ok {
			m.Cache = cacheOf(tc, e.Model.Desc.KVBytesPerToken)
		}
		st.Models = append(st.Models, m)
	}
	for c, q := range queues {
		out := status.Queue{Class: sched.Class(c).String(), Waiting: q.Waiting}
		if !q.Oldest.IsZero() {
			out.OldestWaitMS = max(now.Sub(q.Oldest), 0).Milliseconds()
		}
		st.Queues = append(st.Queues, out)
	}
	return st
}

// modelOf is a loaded model's facts, before its scheduler's and cache's.
func modelOf(e wire.LoadedEntry) status.Model {
	d := e.Model.Desc
	m := status.Model{
		Name: e.Model.Name, Digest: d.Identity, Arch: d.Architecture, Kind: kindOf(e.Model),
		SizeBytes: e.Size, WeightsBytes: int64(d.ModelBytes),
		KVBytes: d.KVBytesPerToken*int64(d.Ctx) + d.RecurrentStateBytes, Context: d.Ctx,
		InFlight: e.InFlight, Pinned: e.Pinned,
	}
	if !e.ExpiresAt.IsZero() {
		at := e.ExpiresAt
		m.ExpiresAt = &at
	}
	return m
}

func kindOf(m *task.Model) string {
	if m.Sched == nil {
		return "embedding"
	}
	return "generation"
}

// lanesOf is a model's lanes by slot (sched.LaneView.Slot, kept while a
// lane runs), idle where none runs, up to its lane count.
func lanesOf(model string, lanes int, busy []sched.LaneView, now time.Time) []status.Lane {
	n := lanes
	for _, v := range busy {
		n = max(n, v.Slot+1)
	}
	out := make([]status.Lane, n)
	for i := range out {
		out[i] = status.Lane{Model: model, Index: i, Phase: status.PhaseIdle}
	}
	for _, v := range busy {
		l := status.Lane{
			Model: model, Index: v.Slot, Phase: phaseOf(v), ID: v.ID, Class: v.Class.String(), API: v.API,
			PromptTokens: v.PromptTokens, PrefilledTokens: v.Prefilled, CachedTokens: v.CachedTokens,
			GeneratedTokens: v.Generated, Preemptions: v.Preemptions,
		}
		if !v.Submitted.IsZero() {
			l.AgeMS = max(now.Sub(v.Submitted), 0).Milliseconds()
		}
		if d := now.Sub(v.FirstToken); !v.FirstToken.IsZero() && d > 0 && v.Generated > 1 {
			// The first token is the prefill's; the rate is of the rest.
			l.TokensPerSecond = float64(v.Generated-1) / d.Seconds()
		}
		out[v.Slot] = l
	}
	return out
}

func phaseOf(v sched.LaneView) string {
	switch {
	case v.Restoring:
		return status.PhaseRestore
	case v.Decoding():
		return status.PhaseDecode
	}
	return status.PhasePrefill
}

// cacheOf summarises a prefix cache by tier. A warm prefix served from
// host memory or disk counts as that tier's hit, any other as the pool's.
func cacheOf(tc tieredCache, kvPerToken int64) *status.Cache {
	s := tc.Stats()
	c := &status.Cache{Hits: s.Hits.Load(), Misses: s.Misses.Load()}
	if n := c.Hits + c.Misses; n > 0 {
		c.HitRate = float64(c.Hits) / float64(n)
	}
	c.Host.Hits, c.Parked.Hits = s.HostHits.Load(), s.ParkHits.Load()
	c.Resident.Hits = max(c.Hits-c.Host.Hits-c.Parked.Hits, 0)
	resident, host, parked := kv.Tiers(tc.View())
	// A resident entry's bytes are its tokens' share of the KV pool.
	c.Resident.Entries, c.Resident.Tokens, c.Resident.Bytes = resident.Entries, resident.Tokens, int64(resident.Tokens)*kvPerToken
	c.Host.Entries, c.Host.Tokens, c.Host.Bytes = host.Entries, host.Tokens, host.Bytes
	c.Parked.Entries, c.Parked.Tokens, c.Parked.Bytes = parked.Entries, parked.Tokens, parked.Bytes
	return c
}
