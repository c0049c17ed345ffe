package cgo

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkCacheTypes prefills a 1,024-token prompt (one plain
// llama_decode) and decodes 32 tokens after one through the tick, on an
// engine of each KV cache type (SF_BENCH_CACHE_TYPES, default
// f16,q8_0,q4_0; K and V alike) taking turns within each round.
// Reported: each type's prefill and decode tokens/s, and their ratios to
// the first type's paired by round. SF_BENCH_MODEL, else the small
// synthetic shape.
func BenchmarkCacheTypes(b *testing.B) {
	path := os.Getenv("SF_BENCH_MODEL")
	if path == "" {
		path = smallModel(b) // the tiny model's head size is no whole quantized block
	}
	types := strings.Split(cmp.Or(os.Getenv("SF_BENCH_CACHE_TYPES"), "f16,q8_0,q4_0"), ",")
	const promptLen, n = 1024, 32
	engines := make([]*Engine, len(types))
	for i, typ := range types {
		e, err := Open(Options{ModelPath: path, Ctx: 2048, Lanes: 1, Seqs: 2, Batch: promptLen, Threads: runtime.NumCPU(),
			CacheTypeK: typ, CacheTypeV: typ, FlashAttn: os.Getenv("SF_FA")})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		engines[i] = e
		tickDecode(b, e, 1, 64, 4) // warm up
	}
	reps := benchReps(3)
	prefill := make([][]float64, len(types))
	decode := make([][]float64, len(types))
	b.ResetTimer()
	for range b.N {
		for r := range reps {
			runs := make([]func(), len(types))
			for i, e := range engines {
				runs[i] = func() {
					prefill[i] = append(prefill[i], plainPrefillRate(b, e, promptLen))
					_, dec := tickDecode(b, e, 1, promptLen, n)
					decode[i] = append(decode[i], n/dec.Seconds())
				}
			}
			inTurn(r, runs...)
		}
	}
	for i, typ := range types {
		b.ReportMetric(median(prefill[i]), typ+"-prefill-tok/s")
		b.ReportMetric(median(decode[i]), typ+"-decode-tok/s")
		if i > 0 {
			b.ReportMetric(median(ratios(prefill[i], prefill[0])), fmt.Sprintf("%s/%s-prefill", typ, types[0]))
			b.ReportMetric(median(ratios(decode[i], decode[0])), fmt.Sprintf("%s/%s-decode", typ, types[0]))
		}
	}
}
