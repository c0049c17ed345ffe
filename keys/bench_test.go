package keys

import (
	"fmt"
	"strings"
	"testing"
)

// What identifying a key costs a request: every key's digest is compared,
// so it grows with the file. Nothing is asserted; compare the ns/op.
func BenchmarkIdentify(b *testing.B) {
	for _, n := range []int{1, 10, 1000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			var sb strings.Builder
			sb.WriteString(`{"keys": [`)
			for i := range n {
				if i > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `{"name": "k%d", "key": "sk-%d"}`, i, i)
			}
			sb.WriteString(`]}`)
			k, err := Open(Source(sb.String()), newClock().now)
			if err != nil {
				b.Fatal(err)
			}
			key := fmt.Sprintf("sk-%d", n/2)
			for b.Loop() {
				if k.Identify(key) == nil {
					b.Fatal("not found")
				}
			}
		})
	}
}
