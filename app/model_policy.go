package app

import (
	"fmt"
	"slices"
	"time"

	sfhttp "superfluid/http"
	"superfluid/pull"
)

// The registry's decisions — which models to unload so that another fits,
// which have outlived their keep-alive — are made here from a snapshot of
// the loaded models, with no locks, clocks or IO, so the tests drive them
// with a virtual clock. The registry carries them out.

// modelView is one loaded (or loading) model as the policy sees it.
type modelView struct {
	Name string
	// Busy: requests hold it, or it is loading; it cannot be unloaded now.
	Busy bool
	// Pinned: a resident model no LRU choice or expiry unloads.
	Pinned   bool
	LastUsed time.Time
	Expires  time.Time // zero: never
	Size     int64
}

// roomFor picks the models to unload so that one more of size need fits
// within maxModels models and budget bytes (budget ≤ 0: no bound): the
// least recently used idle, unpinned models first, no more than needed.
// When unloading every such model is not enough, the error (wrapping
// sfhttp.ErrModelNoRoom) names the sizes.
func roomFor(loaded []modelView, name string, need int64, maxModels int, budget int64) ([]string, error) {
	if budget > 0 && need > budget {
		return nil, fmt.Errorf("%w: model %q needs %s, more than the whole memory budget of %s (--memory-budget)",
			sfhttp.ErrModelNoRoom, name, pull.FormatSize(need), pull.FormatSize(budget))
	}
	var used int64
	var idle []modelView
	for _, v := range loaded {
		used += v.Size
		if !v.Busy && !v.Pinned {
			idle = append(idle, v)
		}
	}
	slices.SortStableFunc(idle, func(a, b modelView) int { return a.LastUsed.Compare(b.LastUsed) })
	count := len(loaded)
	fits := func() bool { return count+1 <= maxModels && (budget <= 0 || used+need <= budget) }
	var victims []string
	for _, v := range idle {
		if fits() {
			break
		}
		victims = append(victims, v.Name)
		count--
		used -= v.Size
	}
	if !fits() {
		if count+1 > maxModels {
			return nil, fmt.Errorf("%w: model %q would be model %d of --max-models %d, and the %d loaded are resident or serving requests",
				sfhttp.ErrModelNoRoom, name, count+1, maxModels, count)
		}
		return nil, fmt.Errorf("%w: model %q needs %s; %s of the memory budget of %s is held by models that are resident or serving requests",
			sfhttp.ErrModelNoRoom, name, pull.FormatSize(need), pull.FormatSize(used), pull.FormatSize(budget))
	}
	return victims, nil
}

// expiredModels lists the idle, unpinned models whose keep-alive has run
// out at now, and the earliest later expiry among the rest (zero: none),
// when the registry should look again.
func expiredModels(loaded []modelView, now time.Time) (due []string, next time.Time) {
	for _, v := range loaded {
		if v.Pinned || v.Expires.IsZero() {
			continue
		}
		if !v.Busy && !v.Expires.After(now) {
			due = append(due, v.Name)
			continue
		}
		if v.Expires.After(now) && (next.IsZero() || v.Expires.Before(next)) {
			next = v.Expires
		}
	}
	return due, next
}

// keepAliveAfter is when a model expires after a request that ended at
// now: the request's keep_alive when it set one (negative: never, 0: now),
// else defaultKeep for a model loaded on demand; a resident model stays
// pinned until a request sets a keep_alive of 0 or more, and one that sets
// a negative keep_alive pins it again. It returns the expiry (zero: never)
// and whether the model is pinned.
func keepAliveAfter(now time.Time, want sfhttp.ModelWant, resident, pinned bool, defaultKeep time.Duration) (time.Time, bool) {
	switch {
	case want.HasKeepAlive && want.KeepAlive < 0:
		return time.Time{}, resident
	case want.HasKeepAlive:
		return now.Add(want.KeepAlive), false
	case pinned:
		return time.Time{}, true
	case defaultKeep < 0:
		return time.Time{}, false
	}
	return now.Add(defaultKeep), false
}
