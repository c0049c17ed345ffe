package keys

import (
	"sync/atomic"

	"superfluid/metric"
)

// counters are one key's numbers for /metrics.
type counters struct {
	requests                                     atomic.Uint64
	limitedRequests, limitedTokens, limitedLanes atomic.Uint64
	forbiddenClass, forbiddenModel               atomic.Uint64
	promptTokens, generatedTokens                atomic.Uint64
	lanes, requestsInFlight                      atomic.Int64
}

// The keys' metrics, labelled by key name (never the key).
var (
	keyRequests     = metric.Counter("superfluid_key_requests_total", "Requests made with an API key of the keys file, refused ones included.", "key")
	keyRateLimited  = metric.Counter("superfluid_key_rate_limited_total", "Requests refused 429: over the key's requests or tokens per minute, or its lane cap.", "key", "limit")
	keyForbidden    = metric.Counter("superfluid_key_forbidden_total", "Requests refused for a class (403) or a model (404) the key's policy leaves out.", "key", "what")
	keyTokens       = metric.Counter("superfluid_key_tokens_total", "Tokens the key's requests took: prompt and generated (an embedding's inputs are prompt).", "key", "kind")
	keyLanes        = metric.Gauge("superfluid_key_lanes_in_flight", "Generations the key holds now (what max_lanes caps).", "key")
	keyInFlight     = metric.Gauge("superfluid_key_requests_in_flight", "Requests of the key being answered now, streams included.", "key")
	keyUnauthorized = metric.Counter("superfluid_key_unauthorized_total", "Requests refused 401: no API key, or one not in force.")
)

// AddTo adds every key's numbers to a /metrics scrape.
func (k *Keeper) AddTo(p *metric.Page) {
	p.Add(keyUnauthorized, float64(k.unauthorized.Load()))
	for _, name := range k.Names() {
		k.mu.Lock()
		st := k.states[name]
		k.mu.Unlock()
		if st == nil {
			continue
		}
		c := &st.c
		p.Add(keyRequests, float64(c.requests.Load()), name)
		p.Add(keyRateLimited, float64(c.limitedRequests.Load()), name, "requests")
		p.Add(keyRateLimited, float64(c.limitedTokens.Load()), name, "tokens")
		p.Add(keyRateLimited, float64(c.limitedLanes.Load()), name, "lanes")
		p.Add(keyForbidden, float64(c.forbiddenClass.Load()), name, "class")
		p.Add(keyForbidden, float64(c.forbiddenModel.Load()), name, "model")
		p.Add(keyTokens, float64(c.promptTokens.Load()), name, "prompt")
		p.Add(keyTokens, float64(c.generatedTokens.Load()), name, "generated")
		p.Add(keyLanes, float64(c.lanes.Load()), name)
		p.Add(keyInFlight, float64(c.requestsInFlight.Load()), name)
	}
}
