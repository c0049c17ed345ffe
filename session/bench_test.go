package session

import (
	"testing"
)

// BenchmarkAppendParallel appends one small item per call from parallel
// writers to their own conversations; records/fsync is what group commit
// saves (compare -cpu 1 with -cpu 8).
func BenchmarkAppendParallel(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	item := msgs("a turn of a conversation", 1)
	b.RunParallel(func(pb *testing.PB) {
		c, _, err := s.Create(nil, nil)
		if err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			it := item[0]
			it.ID = ""
			if _, err := s.Append(c.ID, []Item{it}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	st := s.Stats()
	b.ReportMetric(float64(st.Records)/float64(max(st.Fsyncs, 1)), "records/fsync")
}
