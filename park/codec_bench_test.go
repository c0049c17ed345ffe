package park

import (
	"bytes"
	"testing"
)

// BenchmarkCodec times the pieces of a park write and restore on a state
// shaped like 2,000 tokens of the 0.5B model's f16 cache (24 layers, 256
// K/V values per token per layer, V transposed): about 24.6 MB.
func BenchmarkCodec(b *testing.B) {
	blob := stateBlob(2000, 24, 256, true, ggmlF16, 1)
	var dst, scratch []byte
	b.Run("shuffle", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for range b.N {
			dst = shuffle2(dst[:0], blob)
		}
	})
	b.Run("unshuffle", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for range b.N {
			scratch = unshuffle2(scratch[:0], dst)
		}
	})
	var enc payloadEncoder
	payload := bytes.Clone(enc.encode(blob, FlagShuffle))
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for range b.N {
			enc.encode(blob, FlagShuffle)
		}
		b.ReportMetric(float64(len(payload))/float64(len(blob)), "ratio")
	})
	h := &Header{Flags: FlagShuffle, RawLen: uint64(len(blob)), PayloadLen: uint64(len(payload)), PayloadCRC: crc32c(payload)}
	var dec payloadDecoder
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for range b.N {
			var err error
			dst, err = dec.decode(dst, h, bytes.NewReader(payload))
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("crc", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		for range b.N {
			crc32c(payload)
		}
	})
	var d []byte
	b.Run("demote", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for range b.N {
			d, _ = demote(d[:0], blob)
		}
	})
	b.Run("promote", func(b *testing.B) {
		b.SetBytes(int64(len(blob)))
		for range b.N {
			dst, _ = promote(dst[:0], d)
		}
	})
}
