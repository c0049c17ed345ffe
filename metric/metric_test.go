package metric

import (
	"strings"
	"testing"
)

var (
	testRequests = Counter("test_requests_total", "Requests ended.")
	testBytes    = Gauge("test_model_bytes", "Memory a model holds.", "model", "cache_type_k")
	testLatency  = NewHistogramDef("test_latency_seconds", "Time to the first token.", []float64{0.005, 0.5, 2.5, 10})
)

func render(p *Page) string {
	var b strings.Builder
	if _, err := p.WriteTo(&b); err != nil {
		panic(err)
	}
	return b.String()
}

// A page writes each family once, in the order added, with its HELP and
// TYPE; labels in definition order, values escaped; whole numbers without
// an exponent; histogram buckets cumulative in bound order.
func TestPageRendersFamiliesInOrder(t *testing.T) {
	h := testLatency.New()
	for _, v := range []float64{0.001, 0.3, 3, 11} {
		h.Observe(v)
	}
	p := NewPage()
	p.Add(testRequests, 1234567)
	p.Add(testBytes, 2.5, `a"b\c`, "q8_0")
	p.Add(testBytes, 7, "tiny", "f16")
	p.Add(testBytes, 8, "tiny", "f16") // a second value for one series: the first stands
	p.AddHistogram(h)
	want := `# HELP test_requests_total Requests ended.
# TYPE test_requests_total counter
test_requests_total 1234567
# HELP test_model_bytes Memory a model holds.
# TYPE test_model_bytes gauge
test_model_bytes{model="a\"b\\c",cache_type_k="q8_0"} 2.5
test_model_bytes{model="tiny",cache_type_k="f16"} 7
# HELP test_latency_seconds Time to the first token.
# TYPE test_latency_seconds histogram
test_latency_seconds_bucket{le="0.005"} 1
test_latency_seconds_bucket{le="0.5"} 2
test_latency_seconds_bucket{le="2.5"} 2
test_latency_seconds_bucket{le="10"} 3
test_latency_seconds_bucket{le="+Inf"} 4
test_latency_seconds_sum 14.301
test_latency_seconds_count 4
`
	if got := render(p); got != want {
		t.Fatalf("page:\n%s\nwant:\n%s", got, want)
	}
}

// A family with no samples added is not on the page; a page with nothing
// is empty.
func TestEmptyPage(t *testing.T) {
	if got := render(NewPage()); got != "" {
		t.Fatalf("empty page: %q", got)
	}
}

// A wrong number of label values is a programming error, caught loudly.
func TestAddChecksLabelCount(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a missing label value")
		}
	}()
	NewPage().Add(testBytes, 1, "tiny")
}

// A definition the text format cannot carry is refused when it is made.
func TestDefineRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "has space", "9starts_with_digit"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Counter(%q) did not panic", name)
				}
			}()
			Counter(name, "help")
		}()
	}
}

// Two definitions of one name render as one family, under the first's
// HELP and TYPE.
func TestOneNameOneFamily(t *testing.T) {
	again := Counter("test_requests_total", "Another help.")
	p := NewPage()
	p.Add(testRequests, 1)
	p.Add(again, 2) // the same series: the first value stands
	got := render(p)
	want := "# HELP test_requests_total Requests ended.\n# TYPE test_requests_total counter\ntest_requests_total 1\n"
	if got != want {
		t.Fatalf("page:\n%s\nwant:\n%s", got, want)
	}
}
