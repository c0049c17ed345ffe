package statusui

import (
	"strings"
	"testing"
	"time"

	"superfluid/status"
)

var t0 = time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)

func sample() *status.Status {
	exp := t0.Add(4*time.Minute + 30*time.Second)
	return &status.Status{
		Version: "v1", Now: t0, UptimeSeconds: 3725,
		Models: []status.Model{
			{Name: "qwen:0.5b", Digest: "0123456789abcdef", Kind: "generation", SizeBytes: 1_500_000_000, Context: 8192, Lanes: 2, LanesBusy: 1,
				ExpiresAt: &exp, PromptTokens: 1234, GeneratedTokens: 567,
				Cache: &status.Cache{Hits: 3, Misses: 1, HitRate: 0.75, Resident: status.Tier{Entries: 2, Tokens: 300, Bytes: 3_000_000, Hits: 2},
					Host: status.Tier{Entries: 1, Tokens: 100, Bytes: 1_000_000, Hits: 1}, Parked: status.Tier{Entries: 4, Tokens: 900, Bytes: 500_000}}},
			{Name: "nomic-embed", Kind: "embedding", SizeBytes: 300_000_000, Context: 2048, Pinned: true},
		},
		Lanes: []status.Lane{
			{Model: "qwen:0.5b", Index: 0, Phase: "decode", ID: 42, Class: "chat", API: "openai", PromptTokens: 120, PrefilledTokens: 120, CachedTokens: 64, GeneratedTokens: 37, TokensPerSecond: 18.5, AgeMS: 2500},
			{Model: "qwen:0.5b", Index: 1, Phase: "idle"},
		},
		Queues:      []status.Queue{{Class: "chat"}, {Class: "fim"}, {Class: "agent"}, {Class: "background", Waiting: 3, OldestWaitMS: 1500}},
		Preemptions: 2,
		Throughput: status.Throughput{IntervalSeconds: 2, Samples: []status.Sample{
			{At: t0.Add(-4 * time.Second), PromptPerSecond: 100, GeneratedPerSecond: 10},
			{At: t0.Add(-2 * time.Second), PromptPerSecond: 0, GeneratedPerSecond: 20},
		}},
	}
}

func TestPS(t *testing.T) {
	got := PS(sample(), t0)
	want := "" +
		"NAME          ID             SIZE       PROCESSOR   CONTEXT   UNTIL                LANES   CACHE\n" +
		"qwen:0.5b     0123456789ab   1.5 GB     100% CPU    8192      4 minutes from now   1/2     4.5 MB\n" +
		"nomic-embed   -              300.0 MB   100% CPU    2048      Forever              -       -\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestUntil(t *testing.T) {
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	for _, c := range []struct {
		at   *time.Time
		want string
	}{
		{nil, "Forever"}, {at(-time.Second), "Stopping..."}, {at(time.Second), "1 second from now"},
		{at(59 * time.Second), "59 seconds from now"}, {at(time.Hour), "1 hour from now"}, {at(72 * time.Hour), "3 days from now"},
	} {
		if got := Until(c.at, t0); got != c.want {
			t.Errorf("%v: %q, want %q", c.at, got, c.want)
		}
	}
	if !strings.Contains(PS(&status.Status{}, t0), "NAME") {
		t.Error("an empty server still has the header")
	}
}
