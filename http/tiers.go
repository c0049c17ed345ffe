package http

import "superfluid/kv"

// CacheTiers is a CacheView that can also list what the prefix cache holds
// per tier; the status endpoints (/props, /api/ps) show it when the
// model's cache offers it.
type CacheTiers interface {
	View() []kv.Entry
	ParkInfo() kv.ParkInfo
}

// tierSummary is one tier of the prefix cache as the status endpoints show it.
type tierSummary struct {
	Entries int   `json:"entries"`
	Tokens  int   `json:"tokens"`
	Bytes   int64 `json:"bytes,omitempty"`
}

// cacheStatus is what /props (as "superfluid_cache") and /api/ps (per
// model) report: conversations resident in the KV pool, in host memory,
// and parked on disk, plus the park settings (lossy parking changes
// outputs, so it is said here).
type cacheStatus struct {
	Resident tierSummary `json:"resident"`
	Host     tierSummary `json:"host"`
	Parked   tierSummary `json:"parked"`
	Park     kv.ParkInfo `json:"park"`
}

// cacheStatusOf summarises m's cache, or nil when it lists no tiers.
func cacheStatusOf(m *Model) *cacheStatus {
	ct, ok := m.Cache.(CacheTiers)
	if !ok {
		return nil
	}
	st := &cacheStatus{Park: ct.ParkInfo()}
	resident, host, parked := kv.Tiers(ct.View())
	st.Resident, st.Host, st.Parked = tierSummary(resident), tierSummary(host), tierSummary(parked)
	return st
}
