// Package status is the server's live status as GET /v1/status and
// /v1/status/events carry it: the JSON shape, shared by the server that
// fills it (http/status), the CLI that reads it (superfluid ps, top) and
// the web page; and the client side (Fetch, Follow). It imports nothing of
// the server.
package status

import "time"

// Status is the server at one moment.
type Status struct {
	Version       string    `json:"version"`
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds float64   `json:"uptime_s"`
	Now           time.Time `json:"now"`
	Models        []Model   `json:"models"`
	// Lanes are every generation model's lanes, busy or idle, by model
	// then index; a request keeps its lane's index while it runs.
	Lanes []Lane `json:"lanes"`
	// Queues are the requests waiting for a lane, one per class in
	// priority order, summed over the models.
	Queues []Queue `json:"queues"`
	// Preemptions is the loaded models' total, each since it loaded.
	Preemptions uint64     `json:"preemptions"`
	Throughput  Throughput `json:"throughput"`
}

// Model is one loaded model.
type Model struct {
	Name   string `json:"name"`
	Digest string `json:"digest,omitempty"` // the model file's identity digest
	Arch   string `json:"arch"`
	// Kind is "generation" or "embedding".
	Kind string `json:"kind"`
	// SizeBytes is the memory it holds: weights, KV pool and host cache
	// budget; WeightsBytes the weights alone; KVBytes the KV pool of
	// Context tokens.
	SizeBytes    int64 `json:"size_bytes"`
	WeightsBytes int64 `json:"weights_bytes"`
	KVBytes      int64 `json:"kv_bytes"`
	Context      int   `json:"context"`
	Lanes        int   `json:"lanes"`      // its scheduler's lanes (0 for an embedding model)
	LanesBusy    int   `json:"lanes_busy"` // of which running a request
	InFlight     int   `json:"in_flight"`  // requests holding it
	// ExpiresAt is when it unloads if it stays idle (keep-alive); absent
	// when it never unloads for idleness. Pinned: LRU never unloads it.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Pinned    bool       `json:"pinned"`
	// PromptTokens and GeneratedTokens are its totals since it loaded.
	PromptTokens    uint64 `json:"prompt_tokens"`
	GeneratedTokens uint64 `json:"generated_tokens"`
	Preemptions     uint64 `json:"preemptions"`
	Cache           *Cache `json:"cache,omitempty"` // its prefix cache, absent when it has none
}

// Phases of a lane.
const (
	PhaseIdle    = "idle"
	PhaseRestore = "restore" // reading its warm prefix back from disk
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
)

// Lane is one lane of a model's scheduler. An idle lane has only Model,
// Index and Phase.
type Lane struct {
	Model string `json:"model"`
	Index int    `json:"index"`
	Phase string `json:"phase"`
	// ID is the request's stream ID on this model's scheduler.
	ID    uint64 `json:"id,omitempty"`
	Class string `json:"class,omitempty"`
	API   string `json:"api,omitempty"` // the API that sent it, when known
	// PromptTokens is the request's prompt; PrefilledTokens how much of
	// what the lane prefills (the prompt and, after a preemption, the
	// output so far) is in; CachedTokens the warm prefix its first
	// admission found in the prefix cache.
	PromptTokens    int `json:"prompt_tokens,omitempty"`
	PrefilledTokens int `json:"prefilled_tokens,omitempty"`
	CachedTokens    int `json:"cached_tokens,omitempty"`
	GeneratedTokens int `json:"generated_tokens,omitempty"`
	// TokensPerSecond is its generation rate since its first token.
	TokensPerSecond float64 `json:"tokens_per_s,omitempty"`
	// AgeMS is how long since the request was submitted.
	AgeMS       int64 `json:"age_ms,omitempty"`
	Preemptions int   `json:"preemptions,omitempty"`
}

// Busy reports whether the lane runs a request.
func (l Lane) Busy() bool { return l.Phase != PhaseIdle && l.Phase != "" }

// Queue is one class's waiting requests.
type Queue struct {
	Class   string `json:"class"`
	Waiting int    `json:"waiting"`
	// OldestWaitMS is how long the longest waiting request has waited.
	OldestWaitMS int64 `json:"oldest_wait_ms"`
}

// Cache is a model's prefix cache by tier.
type Cache struct {
	// Hits and Misses count admissions that found a warm prefix (in any
	// tier) and those that found none; HitRate is Hits/(Hits+Misses), 0
	// before any.
	Hits     int64   `json:"hits"`
	Misses   int64   `json:"misses"`
	HitRate  float64 `json:"hit_rate"`
	Resident Tier    `json:"resident"` // in the KV pool
	Host     Tier    `json:"host"`     // in host memory
	Parked   Tier    `json:"parked"`   // on disk
}

// Tier is one tier of a prefix cache: the conversations it holds, their
// tokens and bytes, and the warm prefixes served from it.
type Tier struct {
	Entries int   `json:"entries"`
	Tokens  int   `json:"tokens"`
	Bytes   int64 `json:"bytes"`
	Hits    int64 `json:"hits"`
}

// Throughput is the server's recent token rates, sampled every
// IntervalSeconds over about the last five minutes, oldest first.
type Throughput struct {
	IntervalSeconds float64  `json:"interval_s"`
	Samples         []Sample `json:"samples"`
}

// Sample is the rates over one interval, summed over the models.
type Sample struct {
	At                 time.Time `json:"at"` // the interval's end
	PromptPerSecond    float64   `json:"prompt_tokens_per_s"`
	GeneratedPerSecond float64   `json:"generated_tokens_per_s"`
}

// BusyLanes counts the busy lanes of model ("" for every model) and all
// of its lanes.
func (s *Status) BusyLanes(model string) (busy, total int) {
	for _, l := range s.Lanes {
		if model != "" && l.Model != model {
			continue
		}
		total++
		if l.Busy() {
			busy++
		}
	}
	return busy, total
}
