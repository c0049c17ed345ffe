package park

import (
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"superfluid/engine"
)

const testIdentity = "5f2b9c0e7d41a8b3c6e9f01234567890abcdef0123456789abcdef0123456789"

func toks(base, n int) []engine.Token {
	out := make([]engine.Token, n)
	for i := range out {
		out[i] = engine.Token(base + i)
	}
	return out
}

// stateBlob builds an exported sequence in the engine's layout (the
// sf_state_header, then llama.cpp's sequence state) with cells cells,
// layers layers of width-wide K and V rows of type typ (1: f16, with
// values drawn like activations; anything else: random bytes of rowBytes
// per row), V transposed or not.
func stateBlob(cells, layers, width int, vTrans bool, typ int32, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	var p []byte
	u32 := func(v uint32) { p = binary.LittleEndian.AppendUint32(p, v) }
	u64 := func(v uint64) { p = binary.LittleEndian.AppendUint64(p, v) }
	data := func(values int) {
		if typ != ggmlF16 {
			for range values {
				p = append(p, byte(r.Uint32()))
			}
			return
		}
		for range values {
			p = binary.LittleEndian.AppendUint16(p, floatToHalf(float32(r.NormFloat64()*2)))
		}
	}
	unit := 2
	if typ != ggmlF16 {
		unit = 1
	}
	u32(1) // streams
	u32(uint32(cells))
	for c := range cells {
		u32(uint32(c)) // position
		u32(1)
		u32(0) // sequence id
	}
	vt := uint32(0)
	if vTrans {
		vt = 1
	}
	u32(vt)
	u32(uint32(layers))
	for range layers {
		u32(uint32(typ))
		u64(uint64(width * unit))
		data(cells * width)
	}
	for range layers {
		u32(uint32(typ))
		if vTrans {
			u32(uint32(unit))
			u32(uint32(width))
		} else {
			u64(uint64(width * unit))
		}
		data(cells * width)
	}
	var h [engineHeaderLen]byte
	copy(h[:], "SFKV")
	binary.LittleEndian.PutUint32(h[4:], engineVersionBlock)
	binary.LittleEndian.PutUint32(h[44:], uint32(cells))
	binary.LittleEndian.PutUint64(h[48:], uint64(len(p)))
	binary.LittleEndian.PutUint64(h[56:], engineChecksum(engineVersionBlock, p))
	return append(h[:], p...)
}

// checksumOK reports whether an exported blob's engine checksum holds.
func checksumOK(blob []byte) bool {
	return binary.LittleEndian.Uint64(blob[56:]) == engineChecksum(engineVersion(blob), blob[engineHeaderLen:]) &&
		binary.LittleEndian.Uint64(blob[48:]) == uint64(len(blob)-engineHeaderLen)
}

func testConfig(dir string) Config {
	return Config{Dir: dir, Identity: testIdentity, KVType: "f16", VLayout: VTransposed, Logger: quietLogger()}
}

// subdir is where testConfig(dir) parks.
func subdir(dir string) string { return filepath.Join(dir, Subdir(testIdentity, "f16", VTransposed)) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func open(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// flush waits for every queued write by closing the store and opening the
// directory again with the same configuration.
func flush(t testing.TB, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return open(t, s.cfg)
}

// parked writes one file for tokens and returns its path and the blob.
func parked(t testing.TB, dir string, tokens []engine.Token, seed uint64) (string, []byte) {
	t.Helper()
	s := open(t, testConfig(dir))
	blob := stateBlob(len(tokens), 2, 64, true, ggmlF16, seed)
	if !s.Put(tokens, blob, nil) {
		t.Fatal("put dropped")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Stats().Parks.Load() != 1 {
		t.Fatalf("parks %d, write errors %d", s.Stats().Parks.Load(), s.Stats().WriteErrors.Load())
	}
	return filepath.Join(s.Dir(), Name(tokens)), blob
}

func mutate(t testing.TB, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gate holds the writer inside a write until released.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 64), release: make(chan struct{})} }

func (g *gate) hook() {
	g.entered <- struct{}{}
	<-g.release
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func maxAbsErr(a, b []byte) float64 {
	worst := 0.0
	for i := 0; i+1 < len(a); i += 2 {
		x := halfToFloat(binary.LittleEndian.Uint16(a[i:]))
		y := halfToFloat(binary.LittleEndian.Uint16(b[i:]))
		worst = max(worst, math.Abs(float64(x-y)))
	}
	return worst
}
