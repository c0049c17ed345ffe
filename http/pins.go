package http

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"slices"
	"time"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/session"
)

// Prefix-cache pins that outlive a restart: a pin a request makes (an
// Anthropic cache_control breakpoint, a conversation's prompt) is kept in
// the model's cache and recorded in the session store; at start-up the
// records of a resident model are pinned again, within a budget.

// durablePinner pins in a model's cache and records the pin under the
// model's identity (the digest of its file, so another file served under
// the same name never takes them).
type durablePinner struct {
	cache wire.CachePinner
	store *session.Store
	model string
}

func (p durablePinner) Pin(prefix []engine.Token, ttl time.Duration) {
	p.cache.Pin(prefix, ttl)
	if ttl <= 0 || len(prefix) == 0 {
		return
	}
	if slices.ContainsFunc(prefix, func(t engine.Token) bool { return t < 0 }) {
		// An image's key tokens (task.MediaPrompt.Keyed) are negative; the
		// session store records vocabulary tokens only, so a pin over an
		// image holds until a restart and is not pinned again after it.
		return
	}
	rec := session.Pin{Key: pinKey(p.model, prefix), Model: p.model, Tokens: prefix, Expires: time.Now().Add(ttl)}
	if err := p.store.SetPin(rec); err != nil {
		// The pin holds in memory; only its restart is lost.
		slog.Warn("a cache pin was not recorded", "tokens", len(prefix), "err", err)
	}
}

// Memory is the cache alone, its pins unrecorded (wire.MemoryPinner).
func (p durablePinner) Memory() wire.CachePinner { return p.cache }

// pinKey names a pin by its model and tokens: pinning the same prefix
// again replaces its record (a later expiry).
func pinKey(model string, prefix []engine.Token) string {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	var b [4]byte
	for _, t := range prefix {
		binary.LittleEndian.PutUint32(b[:], uint32(t))
		h.Write(b[:])
	}
	return "pin_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// pinsToRestore picks, of the recorded pins, those of model still live at
// now whose tokens fit budget together, the longest-lived first: they are
// the ones a client said it would come back to latest.
func pinsToRestore(pins []session.Pin, model string, budget int, now time.Time) []session.Pin {
	var mine []session.Pin
	for _, p := range pins {
		if p.Model == model && p.Expires.After(now) && len(p.Tokens) > 0 {
			mine = append(mine, p)
		}
	}
	slices.SortStableFunc(mine, func(a, b session.Pin) int { return b.Expires.Compare(a.Expires) })
	var out []session.Pin
	used := 0
	for _, p := range mine {
		if used+len(p.Tokens) > budget {
			continue
		}
		used += len(p.Tokens)
		out = append(out, p)
	}
	return out
}

// RestorePins pins again, in cache, the recorded pins of the model of
// identity that are still live, at most budget tokens of them (a pin only
// keeps what a request brings back resident — from the park after a
// restart — so this bounds what pins can hold, not what they load). It
// returns how many it pinned.
func (s *Server) RestorePins(cache wire.CachePinner, identity string, budget int) int {
	store, err := s.responses.Sessions()
	if err != nil || cache == nil {
		return 0
	}
	now := time.Now()
	chosen := pinsToRestore(store.Pins(), identity, budget, now)
	for _, p := range chosen {
		cache.Pin(p.Tokens, p.Expires.Sub(now))
	}
	return len(chosen)
}
