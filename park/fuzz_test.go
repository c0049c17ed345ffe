package park

import (
	"bytes"
	"errors"
	"testing"

	"superfluid/engine"
)

// fuzzBlob is the state in the fuzzers' valid file.
func fuzzBlob() []byte { return stateBlob(4, 1, 8, true, ggmlF16, 1) }

// validFile returns a complete park file and a store that accepts it.
func validFile(tb testing.TB) ([]byte, *Store) {
	tb.Helper()
	s := &Store{cfg: testConfig("unused"), model: modelID(testIdentity)}
	tk := toks(3, 4) // small: the fuzzer minimizes inputs byte by byte
	blob := fuzzBlob()
	var enc payloadEncoder
	payload := enc.encode(blob, FlagShuffle)
	h := Header{Flags: FlagShuffle, Level: uint8(level), Model: s.model, KVType: "f16", Tokens: tk,
		RawLen: uint64(len(blob)), PayloadLen: uint64(len(payload)), PayloadCRC: crc32c(payload)}
	return append(appendHeader(nil, &h), payload...), s
}

// FuzzReadHeader: any bytes as a header never panic, and a header that is
// accepted re-encodes to exactly the bytes read (no two encodings of one
// header, nothing ignored).
func FuzzReadHeader(f *testing.F) {
	good, _ := validFile(f)
	f.Add(good)
	f.Add(good[:fixedLen+8])
	f.Add([]byte("SFPK"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := readHeader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("a refusal that is not ErrRefused: %v", err)
			}
			return
		}
		if again := appendHeader(nil, h); !bytes.Equal(again, data[:h.Len()]) {
			t.Fatal("accepted a header that does not re-encode to itself")
		}
	})
}

// FuzzCorruptedFile: a valid file with one byte changed (anywhere, to any
// other value) or cut short is refused — never decoded into state, never a
// panic. Whole-file fuzzing beside it: arbitrary bytes never panic, and
// bytes that are accepted decode to exactly the parked state (another
// valid encoding of it is fine; other state never is).
func FuzzCorruptedFile(f *testing.F) {
	good, s := validFile(f)
	f.Add(uint32(0), byte(1), uint32(0), []byte(nil))
	f.Add(uint32(fixedLen+3), byte(0x80), uint32(0), []byte(nil))
	f.Add(uint32(len(good)-1), byte(0xff), uint32(0), []byte(nil))
	f.Add(uint32(0), byte(0), uint32(17), []byte(nil))
	f.Add(uint32(0), byte(0), uint32(0), good)
	f.Fuzz(func(t *testing.T, pos uint32, xor byte, cut uint32, whole []byte) {
		tk := toks(3, 4)
		name := Name(tk)
		if whole != nil {
			raw, _, err := s.decodeFile(bytes.NewReader(whole), int64(len(whole)), engine.AdapterSetID{}, name, tk, nil)
			if err == nil && !bytes.Equal(raw, fuzzBlob()) {
				t.Fatalf("accepted %d bytes decoding to other state", len(whole))
			}
			return
		}
		b := bytes.Clone(good)
		if cut > 0 {
			b = b[:len(b)-1-int(cut)%len(b)]
		} else {
			if xor == 0 {
				xor = 1
			}
			b[int(pos)%len(b)] ^= xor
		}
		if _, _, err := s.decodeFile(bytes.NewReader(b), int64(len(b)), engine.AdapterSetID{}, name, tk, nil); err == nil {
			t.Fatalf("accepted a corrupted file (pos %d xor %#x cut %d)", pos, xor, cut)
		}
	})
}

// FuzzPromote: a demoted payload that passed its checksum but is garbage
// (a forged file) never panics the lossy decoder.
func FuzzPromote(f *testing.F) {
	d, _ := demote(nil, stateBlob(8, 1, 32, false, ggmlF16, 1))
	f.Add(d)
	f.Fuzz(func(t *testing.T, data []byte) {
		promote(nil, data)
	})
}
