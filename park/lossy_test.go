package park

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestHalfConversionsRoundTripEveryValue(t *testing.T) {
	for h := range 1 << 16 {
		f := halfToFloat(uint16(h))
		if math.IsNaN(float64(f)) {
			if got := floatToHalf(f); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, got)
			}
			continue
		}
		if got := floatToHalf(f); got != uint16(h) {
			t.Fatalf("%#04x → %g → %#04x", h, f, got)
		}
	}
	// Rounding to nearest even, overflow and underflow.
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},           // halfway between 1 and the next half: even (1)
		{1 + 3.0/2048, 0x3c02},           // halfway, rounds up to even
		{65520, 0x7c00},                  // rounds past the largest half: infinity
		{1e-8, 0},                        // below the smallest subnormal
		{-5.960464477539063e-08, 0x8001}, // the smallest negative subnormal
	} {
		if got := floatToHalf(c.f); got != c.want {
			t.Errorf("floatToHalf(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

func TestDemotePromote(t *testing.T) {
	for _, vTrans := range []bool{false, true} {
		blob := stateBlob(100, 3, 64, vTrans, ggmlF16, 5)
		d, err := demote(nil, blob)
		if err != nil {
			t.Fatal(err)
		}
		if r := float64(len(d)) / float64(len(blob)); r > 0.56 {
			t.Errorf("v_trans=%v: demoted to %.2f of the size", vTrans, r)
		}
		back, err := promote(nil, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(back) != len(blob) || !checksumOK(back) {
			t.Fatalf("promoted %d bytes of %d, checksum ok %v", len(back), len(blob), checksumOK(back))
		}
		// Values are within half a step of their block's scale (|x| ≤ ~8
		// here: scale ≤ 8/127, error ≤ 0.032 plus f16 rounding).
		if e := maxAbsErr(blob[engineHeaderLen:], back[engineHeaderLen:]); e > 0.04 || e == 0 {
			t.Errorf("v_trans=%v: worst error %g", vTrans, e)
		}
		// Everything but the f16 data is byte for byte the same: the
		// positions, sequence ids and layout fields (compare the first
		// cell's metadata and the K type field).
		if !bytes.Equal(blob[engineHeaderLen:engineHeaderLen+20], back[engineHeaderLen:engineHeaderLen+20]) {
			t.Error("metadata changed")
		}
	}
}

func TestDemoteKeepsNonFiniteRegionsVerbatim(t *testing.T) {
	blob := stateBlob(4, 1, 32, false, ggmlF16, 1)
	off := len(blob) - 10
	blob[off], blob[off+1] = 0x00, 0x7c // +inf in the last V region
	fixChecksum(blob)
	d, err := demote(nil, blob)
	if err != nil {
		t.Fatal(err)
	}
	back, err := promote(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back[len(back)-128:], blob[len(blob)-128:]) {
		t.Error("the region with an infinity was not kept verbatim")
	}
}

func TestDemoteRefusesWhatItCannotRead(t *testing.T) {
	if _, err := demote(nil, stateBlob(50, 2, 68, false, 8, 1)); !errors.Is(err, errNotDemotable) {
		t.Errorf("q8_0 state: %v", err)
	}
	blob := stateBlob(50, 2, 64, false, ggmlF16, 1)
	for name, b := range map[string][]byte{
		"short":        blob[:len(blob)-1],
		"long":         append(bytes.Clone(blob), 0),
		"not ours":     append([]byte("XXXX"), blob[4:]...),
		"huge layers":  setU32(bytes.Clone(blob), engineHeaderLen+8+50*12+4, 1<<20),
		"huge streams": setU32(bytes.Clone(blob), engineHeaderLen, 1<<30),
	} {
		if _, err := demote(nil, b); err == nil {
			t.Errorf("%s: demoted", name)
		}
	}
}

func TestLossyStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Lossy = true
	s := open(t, cfg)
	tk := toks(1, 200)
	blob := stateBlob(200, 2, 64, true, ggmlF16, 3)
	s.Put(tk, blob, nil)
	s = flush(t, s)
	st, _ := os.Stat(filepath.Join(s.Dir(), Name(tk)))
	if r := float64(st.Size()) / float64(len(blob)); r > 0.56 {
		t.Errorf("lossy file is %.2f of the state", r)
	}
	got, err := s.Load(tk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(blob) || !checksumOK(got) || bytes.Equal(got, blob) {
		t.Fatal("lossy restore: wrong size, bad checksum, or (impossibly) exact")
	}
	if !s.List()[0].Lossy {
		t.Error("the index does not say the file is lossy")
	}
	// A state with nothing to demote is parked losslessly, and counted.
	tk2 := toks(9000, 10)
	odd := stateBlob(10, 1, 64, true, 0, 4) // f32 data
	s.Put(tk2, odd, nil)
	s = flush(t, s)
	if got, err := s.Load(tk2, nil); err != nil || !bytes.Equal(got, odd) {
		t.Fatalf("fallback: %v", err)
	}
}

func setU32(b []byte, off int, v uint32) []byte {
	b[off], b[off+1], b[off+2], b[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	return b
}

func fixChecksum(blob []byte) {
	h := engineChecksum(engineVersion(blob), blob[engineHeaderLen:])
	for i := range 8 {
		blob[56+i] = byte(h >> (8 * i))
	}
}

// The engine's checksums are native/seq.cpp's fnv1a (version 1), whose
// offset basis is not the standard one, and block_checksum (version 2):
// the values below were computed with the native functions, compiled on
// their own, and pin them (the e2e lossy test has the engine accept a
// promoted blob, the end-to-end proof). The block inputs cover an empty
// payload, a tail alone, one whole block, and blocks with a tail.
func TestEngineChecksumsMatchTheNativeOnes(t *testing.T) {
	if got := engineChecksum(engineVersionFNV, []byte("superfluid")); got != 1858722405405763046 {
		t.Fatalf("version 1 checksum = %d", got)
	}
	buf := make([]byte, 100)
	for i := range buf {
		buf[i] = byte(i*37 + 11)
	}
	for _, c := range []struct {
		in   []byte
		want uint64
	}{
		{[]byte("superfluid"), 8510134068788303755},
		{buf[:0], 11408823509580372228},
		{buf[:32], 14335828957786290525},
		{buf, 7765572648019188451},
	} {
		if got := engineChecksum(engineVersionBlock, c.in); got != c.want {
			t.Fatalf("version 2 checksum of %d bytes = %d, want %d", len(c.in), got, c.want)
		}
	}
}

func TestShuffleRoundTripsEveryLength(t *testing.T) {
	src := stateBlob(3, 1, 8, false, ggmlF16, 1)
	for n := range len(src) {
		s := shuffle2(nil, src[:n])
		for i := 0; i < n/2; i++ { // the planes, byte by byte
			if s[i] != src[2*i] || s[n/2+i] != src[2*i+1] {
				t.Fatalf("length %d: byte %d misplaced", n, i)
			}
		}
		if back := unshuffle2([]byte{9}, s); !bytes.Equal(back[1:], src[:n]) || back[0] != 9 {
			t.Fatalf("length %d: no round trip", n)
		}
	}
}
