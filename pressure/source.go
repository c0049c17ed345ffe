// Package pressure reads how short of memory the machine is and tells the
// server: a Source gives the level (the Linux one from PSI and
// /proc/meminfo, a file's word in tests), and a Monitor polls it every
// second, logs and counts each change, and hands the new level on (app
// passes it to every model's scheduler, which decides what to do:
// sched/pressure.go). The level is sched.Pressure.
package pressure

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"superfluid/sched"
)

// Source reads the machine's memory pressure now. A Monitor calls it from
// one goroutine.
type Source interface {
	Level() (sched.Pressure, error)
}

// Thresholds turn Linux's readings into a level. A level is reached when
// either reading reaches its mark.
type Thresholds struct {
	// WarnStall and CriticalStall are marks on PSI's "some avg10" for
	// memory: the percentage of the last 10 s in which at least one task
	// stalled waiting for memory (reclaim, refaults, swap-in).
	WarnStall, CriticalStall float64
	// WarnAvailable and CriticalAvailable are marks on MemAvailable as a
	// percentage of MemTotal: at or below them.
	WarnAvailable, CriticalAvailable float64
}

// DefaultThresholds: a machine whose tasks stall on memory a tenth of the
// time is thrashing enough to notice (systemd-oomd starts killing at 60%
// over 20 s); at 40% it is close to that. MemAvailable is the kernel's
// estimate of what can be had without swapping: 10% left is the point at
// which browsers and IDEs start to feel it, 5% the point before the OOM
// killer.
var DefaultThresholds = Thresholds{WarnStall: 10, CriticalStall: 40, WarnAvailable: 10, CriticalAvailable: 5}

// Validate refuses marks out of order or out of range.
func (t Thresholds) Validate() error {
	switch {
	case t.WarnStall <= 0 || t.CriticalStall < t.WarnStall || t.CriticalStall > 100:
		return fmt.Errorf("pressure: stall marks warning %g%%, critical %g%%: need 0 < warning <= critical <= 100", t.WarnStall, t.CriticalStall)
	case t.CriticalAvailable <= 0 || t.WarnAvailable < t.CriticalAvailable || t.WarnAvailable >= 100:
		return fmt.Errorf("pressure: available-memory marks warning %g%%, critical %g%%: need 0 < critical <= warning < 100", t.WarnAvailable, t.CriticalAvailable)
	}
	return nil
}

// Reading is what Linux says of memory at one moment.
type Reading struct {
	// Stall is PSI's memory "some avg10", percent; HasStall is false on a
	// kernel without PSI (or with it off), where only MemAvailable counts.
	Stall    float64
	HasStall bool
	// Available and Total are MemAvailable and MemTotal, bytes.
	Available, Total uint64
}

// Level is the reading's level under t.
func (t Thresholds) Level(r Reading) sched.Pressure {
	availPct := 100.0
	if r.Total > 0 {
		availPct = 100 * float64(r.Available) / float64(r.Total)
	}
	switch {
	case r.HasStall && r.Stall >= t.CriticalStall, availPct <= t.CriticalAvailable:
		return sched.PressureCritical
	case r.HasStall && r.Stall >= t.WarnStall, availPct <= t.WarnAvailable:
		return sched.PressureWarning
	}
	return sched.PressureNone
}

// Linux reads /proc/pressure/memory and /proc/meminfo (two small reads a
// poll). The paths are fields so that tests can point them at files.
type Linux struct {
	PSIPath, MeminfoPath string
	Thresholds           Thresholds
}

// NewLinux is the source over the real /proc files.
func NewLinux(t Thresholds) *Linux {
	return &Linux{PSIPath: "/proc/pressure/memory", MeminfoPath: "/proc/meminfo", Thresholds: t}
}

// Level reads the files and applies the thresholds.
func (l *Linux) Level() (sched.Pressure, error) {
	r, err := l.Read()
	if err != nil {
		return sched.PressureNone, err
	}
	return l.Thresholds.Level(r), nil
}

// Read reads the files. A PSI file missing or unreadable is not an
// error: the reading has no stall.
func (l *Linux) Read() (Reading, error) {
	var r Reading
	mi, err := os.ReadFile(l.MeminfoPath)
	if err != nil {
		return r, fmt.Errorf("pressure: %w", err)
	}
	if r.Available, r.Total, err = parseMeminfo(mi); err != nil {
		return r, err
	}
	psi, err := os.ReadFile(l.PSIPath)
	if err != nil {
		// No PSI file (an older kernel), or one that cannot be read
		// ("operation not supported" when booted with psi=0): memory
		// alone decides.
		return r, nil
	}
	r.Stall, err = parsePSISome(psi)
	r.HasStall = err == nil
	return r, err
}

// parseMeminfo reads MemAvailable and MemTotal (kB) from /proc/meminfo.
func parseMeminfo(b []byte) (avail, total uint64, err error) {
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "MemAvailable" && name != "MemTotal") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, 0, fmt.Errorf("pressure: /proc/meminfo: %s has no value", name)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > 1<<53 {
			return 0, 0, fmt.Errorf("pressure: /proc/meminfo: %s %q is not a size in kB", name, f[0])
		}
		if name == "MemAvailable" {
			avail = kb * 1024
		} else {
			total = kb * 1024
		}
		found++
	}
	if found < 2 || total == 0 {
		return 0, 0, errors.New("pressure: /proc/meminfo lacks MemTotal or MemAvailable")
	}
	return avail, total, nil
}

// parsePSISome reads avg10 of the "some" line of a PSI file:
// "some avg10=1.23 avg60=0.50 avg300=0.10 total=12345".
func parsePSISome(b []byte) (float64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "avg10="); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil || x < 0 || x > 100 {
					return 0, fmt.Errorf("pressure: PSI avg10 %q is not a percentage", v)
				}
				return x, nil
			}
		}
	}
	return 0, errors.New("pressure: the PSI file has no \"some avg10\"")
}

// File is the testing hook: a source that reads a level's name ("none",
// "warning" or "critical") from a file the test writes. A missing or
// empty file is none. `serve --pressure-file` (hidden) and
// app.Options.Pressure.Source use it; it is not for production.
type File string

// Level reads the file.
func (f File) Level() (sched.Pressure, error) {
	b, err := os.ReadFile(string(f))
	if errors.Is(err, os.ErrNotExist) {
		return sched.PressureNone, nil
	}
	if err != nil {
		return sched.PressureNone, fmt.Errorf("pressure: %w", err)
	}
	return ParseLevel(strings.TrimSpace(string(b)))
}

// ParseLevel reads a level's name; "" is none.
func ParseLevel(s string) (sched.Pressure, error) {
	switch strings.ToLower(s) {
	case "", "none", "normal":
		return sched.PressureNone, nil
	case "warning", "warn":
		return sched.PressureWarning, nil
	case "critical":
		return sched.PressureCritical, nil
	}
	return sched.PressureNone, fmt.Errorf("pressure: unknown level %q (none, warning or critical)", s)
}
