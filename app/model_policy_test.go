package app

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	sfhttp "superfluid/http"
)

// The registry's decisions on a virtual clock: t0 plus minutes.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func TestRoomForUnloadsTheLeastRecentlyUsedIdleModel(t *testing.T) {
	loaded := []modelView{
		{Name: "chat", Pinned: true, LastUsed: at(0), Size: 100},
		{Name: "old", LastUsed: at(1), Size: 100},
		{Name: "newer", LastUsed: at(5), Size: 100},
	}
	for _, c := range []struct {
		name      string
		loaded    []modelView
		max       int
		budget    int64
		need      int64
		want      []string
		wantNoFit string
	}{
		{name: "room to spare", loaded: loaded, max: 4, need: 100},
		{name: "count: the oldest idle goes", loaded: loaded, max: 3, need: 100, want: []string{"old"}},
		{name: "count: two go, oldest first", loaded: loaded, max: 2, need: 100, want: []string{"old", "newer"}},
		{name: "budget: the oldest is enough", loaded: loaded, max: 9, budget: 350, need: 100, want: []string{"old"}},
		{name: "budget: both", loaded: loaded, max: 9, budget: 250, need: 150, want: []string{"old", "newer"}},
		{name: "budget unbounded", loaded: loaded, max: 9, budget: 0, need: 1 << 40},
		{name: "pinned never goes", loaded: loaded, max: 1, need: 100, wantNoFit: "--max-models 1"},
		{name: "bigger than the budget", loaded: loaded, max: 9, budget: 500, need: 600, wantNoFit: "more than the whole memory budget"},
		{name: "busy never goes", loaded: []modelView{{Name: "a", Busy: true, LastUsed: at(0), Size: 100}, {Name: "b", LastUsed: at(9), Size: 100}},
			max: 2, need: 100, want: []string{"b"}},
		{name: "busy and pinned hold the budget", loaded: []modelView{{Name: "a", Busy: true, Size: 300}, {Name: "p", Pinned: true, Size: 100}},
			max: 9, budget: 450, need: 100, wantNoFit: "held by models that are resident or serving requests"},
	} {
		got, err := roomFor(c.loaded, "new", c.need, c.max, c.budget)
		if c.wantNoFit != "" {
			if !errors.Is(err, sfhttp.ErrModelNoRoom) || !strings.Contains(err.Error(), c.wantNoFit) || !strings.Contains(err.Error(), `"new"`) {
				t.Errorf("%s: %v, %v; want ErrModelNoRoom saying %q", c.name, got, err, c.wantNoFit)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: unload %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

func TestExpiredModels(t *testing.T) {
	loaded := []modelView{
		{Name: "pinned", Pinned: true, Expires: at(1)},
		{Name: "forever"},
		{Name: "due", Expires: at(5)},
		{Name: "busy-due", Busy: true, Expires: at(4)},
		{Name: "later", Expires: at(8)},
		{Name: "latest", Expires: at(20)},
	}
	due, next := expiredModels(loaded, at(5))
	if !slices.Equal(due, []string{"due"}) || !next.Equal(at(8)) {
		t.Errorf("at 5: due %v, next %v; want [due], at 8", due, next)
	}
	due, next = expiredModels(loaded, at(4))
	if len(due) != 0 || !next.Equal(at(5)) {
		t.Errorf("at 4: due %v, next %v; want none, at 5", due, next)
	}
	due, next = expiredModels(loaded, at(30))
	if !slices.Equal(due, []string{"due", "later", "latest"}) || !next.IsZero() {
		t.Errorf("at 30: due %v, next %v", due, next)
	}
}

func TestKeepAliveAfter(t *testing.T) {
	def := 5 * time.Minute
	set := func(d time.Duration) sfhttp.ModelWant { return sfhttp.ModelWant{KeepAlive: d, HasKeepAlive: true} }
	for _, c := range []struct {
		name             string
		want             sfhttp.ModelWant
		resident, pinned bool
		defaultKeep      time.Duration
		expires          time.Time
		pinnedAfter      bool
	}{
		{name: "on demand, unset: the default", defaultKeep: def, expires: at(5)},
		{name: "on demand, default for ever", defaultKeep: -1},
		{name: "on demand, 2m", want: set(2 * time.Minute), defaultKeep: def, expires: at(2)},
		{name: "on demand, 0: now", want: set(0), defaultKeep: def, expires: at(0)},
		{name: "on demand, -1: never, not pinned", want: set(-1), defaultKeep: def},
		{name: "resident, unset: pinned", resident: true, pinned: true, defaultKeep: def, pinnedAfter: true},
		{name: "resident, 0: unpinned, now", want: set(0), resident: true, pinned: true, defaultKeep: def, expires: at(0)},
		{name: "resident unpinned, unset: the default", resident: true, defaultKeep: def, expires: at(5)},
		{name: "resident unpinned, -1: pinned again", want: set(-1), resident: true, defaultKeep: def, pinnedAfter: true},
	} {
		exp, pinned := keepAliveAfter(at(0), c.want, c.resident, c.pinned, c.defaultKeep)
		if !exp.Equal(c.expires) || pinned != c.pinnedAfter {
			t.Errorf("%s: expires %v pinned %v; want %v %v", c.name, exp, pinned, c.expires, c.pinnedAfter)
		}
	}
}
