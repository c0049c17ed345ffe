package grammar

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMeasureHostile (HOSTILE=name:size) times one hostile input and its
// allocation, for the figures in the report.
func TestMeasureHostile(t *testing.T) {
	spec := os.Getenv("HOSTILE")
	if spec == "" {
		t.Skip("HOSTILE not set")
	}
	name, sz, _ := strings.Cut(spec, ":")
	n, _ := strconv.Atoi(sz)
	var run func() error
	var size int
	switch name {
	case "deep":
		s := deepGBNF(n)
		size = len(s)
		run = func() error { _, err := ParseGBNF(s); return err }
	case "chain":
		s := chainGBNF(n)
		size = len(s)
		run = func() error { _, err := ParseGBNF(s); return err }
	case "enum":
		s := enumIntersection(n)
		size = len(s)
		run = func() error { _, err := FromJSONSchema([]byte(s), Options{}); return err }
	case "refs":
		s := refDoubling(n)
		size = len(s)
		run = func() error { _, err := FromJSONSchema([]byte(s), Options{}); return err }
	case "refchain":
		s := refChain(n)
		size = len(s)
		run = func() error { _, err := FromJSONSchema([]byte(s), Options{}); return err }
	case "longname":
		s := longPropertyName(n)
		size = len(s)
		run = func() error { _, err := FromJSONSchema([]byte(s), Options{}); return err }
	case "oneof":
		s := oneOfConsts(n)
		size = len(s)
		run = func() error { _, err := FromJSONSchema([]byte(s), Options{}); return err }
	case "pattern":
		s := deepPattern(n)
		size = len(s)
		run = func() error { _, err := FromJSONSchema([]byte(s), Options{}); return err }
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	err := run()
	el := time.Since(start)
	runtime.ReadMemStats(&m1)
	st, _ := os.ReadFile("/proc/self/status")
	hwm := ""
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmHWM") {
			hwm = strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	errs := "<nil>"
	if err != nil {
		errs = err.Error()
		if len(errs) > 120 {
			errs = errs[:120]
		}
	}
	t.Logf("%s n=%d input=%d B: %v, allocated %d MB, peak RSS %s, err %s", name, n, size, el.Round(time.Millisecond), (m1.TotalAlloc-m0.TotalAlloc)>>20, hwm, errs)
}
