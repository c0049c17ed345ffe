package pull

import (
	"strings"
	"testing"
	"time"
)

func TestBarRedrawsAtMostFiveTimesASecond(t *testing.T) {
	var out strings.Builder
	clock := time.Unix(1000, 0)
	b := NewBar(&out)
	b.now = func() time.Time { return clock }
	const total = 100_000_000
	b.Update(Progress{Name: "model.gguf", Done: 20_000_000, Total: total, Start: 20_000_000}) // resumed at 20%
	for i := 1; i <= 40; i++ {
		clock = clock.Add(50 * time.Millisecond)                                                  // 2 s in all
		b.Update(Progress{Name: "model.gguf", Done: 20_000_000 + int64(i)*500_000, Total: total}) // 10 MB/s
	}
	draws := strings.Split(out.String(), "\r")[1:]
	if len(draws) != 11 { // the first, then one per 200 ms
		t.Fatalf("%d draws: %q", len(draws), draws)
	}
	last := draws[len(draws)-1]
	want := "model.gguf  40.0 MB / 100.0 MB  40% [########            ]  10.0 MB/s  ETA 6s\x1b[K"
	if last != want {
		t.Fatalf("last draw %q\nwant      %q", last, want)
	}
	if first := draws[0]; first != "model.gguf  20.0 MB / 100.0 MB  20% [####                ]\x1b[K" {
		t.Fatalf("first draw %q", first)
	}
	b.Update(Progress{Name: "model.gguf", Done: total, Total: total}) // completion is always drawn
	b.Finish()
	if !strings.HasSuffix(out.String(), "100% [####################]  40.0 MB/s\x1b[K\n") {
		t.Fatalf("finish: %q", out.String()[strings.LastIndex(out.String(), "\r"):])
	}
}

func TestBarUnknownTotalAndLongName(t *testing.T) {
	var out strings.Builder
	clock := time.Unix(0, 0)
	b := NewBar(&out)
	b.now = func() time.Time { return clock }
	name := strings.Repeat("x", 40) + ".gguf"
	b.Update(Progress{Name: name, Done: 0, Total: -1})
	clock = clock.Add(time.Second)
	b.Update(Progress{Name: name, Done: 2_500_000, Total: -1})
	b.Finish()
	if want := "\r" + strings.Repeat("x", 31) + "…  2.5 MB  2.5 MB/s\x1b[K\n"; !strings.HasSuffix(out.String(), want) {
		t.Fatalf("%q, want suffix %q", out.String(), want)
	}
	var none strings.Builder
	NewBar(&none).Finish()
	if none.Len() != 0 {
		t.Fatalf("a bar never updated wrote %q", none.String())
	}
}

func TestFormatETA(t *testing.T) {
	for d, want := range map[time.Duration]string{6 * time.Second: "6s", 245 * time.Second: "4m05s", 3720 * time.Second: "1h02m"} {
		if got := formatETA(d); got != want {
			t.Errorf("formatETA(%s) = %q, want %q", d, got, want)
		}
	}
}
