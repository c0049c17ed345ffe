package pressure

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"superfluid/metric"
	"superfluid/sched"
)

const meminfo = `MemTotal:       16000000 kB
MemFree:          500000 kB
MemAvailable:    %AVAIL% kB
Buffers:          100000 kB
`

func writeFiles(t *testing.T, avail, psi string) *Linux {
	t.Helper()
	dir := t.TempDir()
	l := &Linux{PSIPath: filepath.Join(dir, "psi"), MeminfoPath: filepath.Join(dir, "meminfo"), Thresholds: DefaultThresholds}
	if err := os.WriteFile(l.MeminfoPath, []byte(strings.Replace(meminfo, "%AVAIL%", avail, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if psi != "" {
		if err := os.WriteFile(l.PSIPath, []byte(psi), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func psiSome(avg10 string) string {
	return "some avg10=" + avg10 + " avg60=1.00 avg300=0.50 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
}

func TestLinuxSourceReadsPSIAndMemAvailable(t *testing.T) {
	for _, c := range []struct {
		name, avail, psi string
		want             sched.Pressure
	}{
		{"calm", "8000000", psiSome("0.50"), sched.PressureNone},
		{"stalling", "8000000", psiSome("12.00"), sched.PressureWarning},
		{"thrashing", "8000000", psiSome("55.10"), sched.PressureCritical},
		{"little left", "1500000", psiSome("0.00"), sched.PressureWarning},      // 9.4%
		{"almost none left", "700000", psiSome("0.00"), sched.PressureCritical}, // 4.4%
		{"no PSI: memory alone", "1500000", "", sched.PressureWarning},
		{"no PSI, plenty", "8000000", "", sched.PressureNone},
	} {
		got, err := writeFiles(t, c.avail, c.psi).Level()
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

func TestLinuxSourceRefusesWhatItCannotRead(t *testing.T) {
	for _, c := range []struct{ name, avail, psi string }{
		{"meminfo value not a number", "lots", psiSome("1.0")},
		{"PSI without avg10", "8000000", "some avg60=1.00\n"},
		{"PSI past 100", "8000000", psiSome("250")},
		{"PSI not a number", "8000000", psiSome("NaN%")},
	} {
		if lv, err := writeFiles(t, c.avail, c.psi).Level(); err == nil {
			t.Errorf("%s: read as %v, want an error", c.name, lv)
		}
	}
	l := &Linux{PSIPath: "/nonexistent/psi", MeminfoPath: "/nonexistent/meminfo", Thresholds: DefaultThresholds}
	if _, err := l.Level(); err == nil {
		t.Error("a missing /proc/meminfo read as a level")
	}
}

// The real files, where the machine has them: they parse.
func TestLinuxSourceReadsThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	r, err := NewLinux(DefaultThresholds).Read()
	if err != nil || r.Total == 0 || r.Available > r.Total {
		t.Fatalf("%+v, %v", r, err)
	}
}

func TestThresholdsValidate(t *testing.T) {
	if err := DefaultThresholds.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, th := range []Thresholds{
		{WarnStall: 50, CriticalStall: 40, WarnAvailable: 10, CriticalAvailable: 5},
		{WarnStall: 10, CriticalStall: 40, WarnAvailable: 4, CriticalAvailable: 5},
		{WarnStall: 0, CriticalStall: 40, WarnAvailable: 10, CriticalAvailable: 5},
		{WarnStall: 10, CriticalStall: 140, WarnAvailable: 10, CriticalAvailable: 5},
	} {
		if th.Validate() == nil {
			t.Errorf("%+v accepted", th)
		}
	}
}

func TestFileSource(t *testing.T) {
	f := File(filepath.Join(t.TempDir(), "level"))
	if lv, err := f.Level(); err != nil || lv != sched.PressureNone {
		t.Fatalf("missing file: %v, %v", lv, err)
	}
	for word, want := range map[string]sched.Pressure{"warning\n": sched.PressureWarning, " critical ": sched.PressureCritical, "none": sched.PressureNone} {
		if err := os.WriteFile(string(f), []byte(word), 0o644); err != nil {
			t.Fatal(err)
		}
		if lv, err := f.Level(); err != nil || lv != want {
			t.Errorf("%q: %v, %v", word, lv, err)
		}
	}
	os.WriteFile(string(f), []byte("panic"), 0o644)
	if _, err := f.Level(); err == nil {
		t.Error("an unknown word read as a level")
	}
}

// script is a source that reads out a list of levels (an error for -1).
type script struct {
	levels []int
	at     int
}

func (s *script) Level() (sched.Pressure, error) {
	v := s.levels[min(s.at, len(s.levels)-1)]
	s.at++
	if v < 0 {
		return 0, errors.New("unreadable")
	}
	return sched.Pressure(v), nil
}

// Up at once, down only after three calm polls in a row (to the worst of
// them); a failed read changes nothing; each change is handed on once and
// counted.
func TestMonitorStepsUpAtOnceAndDownWhenCalm(t *testing.T) {
	src := &script{levels: []int{0, 1, 2, 2, 0, 1, 0, 0, 2, 0, -1, 0, 0, 0, 0}}
	var applied []sched.Pressure
	m := NewMonitor(Config{Source: src, Logger: slog.New(slog.DiscardHandler)}, func(p sched.Pressure) { applied = append(applied, p) })
	var levels []sched.Pressure
	for range src.levels {
		m.Poll()
		levels = append(levels, m.Level())
	}
	W, C, N := sched.PressureWarning, sched.PressureCritical, sched.PressureNone
	wantLevels := []sched.Pressure{N, W, C, C, C, C, W, W, C, C, C, C, N, N, N}
	if !slices.Equal(levels, wantLevels) {
		t.Fatalf("levels %v\nwant   %v", levels, wantLevels)
	}
	if want := []sched.Pressure{W, C, W, C, N}; !slices.Equal(applied, want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
	p := metric.NewPage()
	m.AddMetrics(p)
	var b strings.Builder
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`superfluid_pressure_transitions_total{to="critical"} 2`, `superfluid_pressure_transitions_total{to="warning"} 2`,
		`superfluid_pressure_transitions_total{to="none"} 1`, "superfluid_pressure_read_errors_total 1", "superfluid_pressure_level 0"} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, b.String())
		}
	}
}
