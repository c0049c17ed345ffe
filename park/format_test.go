package park

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kv     string
		v      string // the V cache's type; "": kv's
		blob   []byte
		shuffl bool
		layout VLayout
	}{
		{"f16 shuffled", "f16", "", stateBlob(300, 2, 64, true, ggmlF16, 1), true, VTransposed},
		{"f16 odd length", "f16", "f16", append(stateBlob(10, 1, 8, false, ggmlF16, 2), 7), true, VRows},
		{"q8_0 plain", "q8_0", "", stateBlob(300, 2, 68, false, 8, 3), false, VRows},
		{"q8_0 K, f16 V", "q8_0", "f16", stateBlob(300, 2, 68, false, 8, 3), false, VRows},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.KVType, cfg.VType, cfg.VLayout = tc.kv, tc.v, tc.layout
			s := open(t, cfg)
			tk := toks(100, 300)
			if !s.Put(tk, tc.blob, nil) {
				t.Fatal("dropped")
			}
			s = flush(t, s)
			list := s.List()
			if len(list) != 1 || !slices.Equal(list[0].Tokens, tk) || list[0].Name != Name(tk) {
				t.Fatalf("index %+v", list)
			}
			got, err := s.Load(tk, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.blob) {
				t.Fatal("restored state differs from the parked one")
			}
			types := tc.kv
			if tc.v != "" && tc.v != tc.kv {
				types += "-" + tc.v
			}
			b, err := os.ReadFile(filepath.Join(dir, Subdir(testIdentity, types, tc.layout), Name(tk)))
			if err != nil {
				t.Fatal(err)
			}
			if (b[7]&FlagShuffle != 0) != tc.shuffl || VLayout(b[9]) != tc.layout {
				t.Fatalf("flags %#x", b[7])
			}
			// The V type is written only when it is not K's: a file of one
			// type is what builds before the two could differ wrote.
			wantV := ""
			if types != tc.kv {
				wantV = tc.v
			}
			if v := string(bytes.TrimRight(b[108:116], "\x00")); v != wantV || string(bytes.TrimRight(b[48:56], "\x00")) != tc.kv {
				t.Fatalf("K type field %q, V type field %q", b[48:56], v)
			}
			if st := s.Stats(); st.Loads.Load() != 1 || st.LoadRaw.Load() != int64(len(tc.blob)) || st.LoadBytes.Load() != int64(len(b)) {
				t.Fatalf("load stats %d %d %d", st.Loads.Load(), st.LoadRaw.Load(), st.LoadBytes.Load())
			}
		})
	}
}

func TestHeaderIsCanonical(t *testing.T) {
	h := &Header{Flags: FlagShuffle, Level: 1, VLayout: VRows, Model: modelID(testIdentity), KVType: "f16", Tokens: toks(5, 17), RawLen: 1000, PayloadLen: 10, PayloadCRC: 42}
	b := appendHeader(nil, h)
	if int64(len(b)) != h.Len() {
		t.Fatalf("header of %d bytes, Len %d", len(b), h.Len())
	}
	got, err := readHeader(bytes.NewReader(append(b, make([]byte, 10)...)), int64(len(b))+10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, h.Tokens) || got.Version != formatVersion || got.VLayout != VRows || got.KVType != "f16" || got.Model != h.Model || got.RawLen != 1000 || got.PayloadCRC != 42 {
		t.Fatalf("read %+v", got)
	}
}

// Every refusal reason: the file is refused with that reason, counted,
// removed when damaged (left alone when sound but another format's or
// identity's), and Load (where it gets that far) returns ErrRefused.
func TestRefusals(t *testing.T) {
	tk := toks(1000, 64)
	cases := []struct {
		name    string
		reason  Reason
		atOpen  bool
		foreign bool
		// cfg changes the identity; the file is copied by hand into that
		// identity's subdirectory.
		cfg    func(*Config)
		damage func(t *testing.T, path string)
	}{
		{name: "not a park file", reason: ReasonFormat, atOpen: true, foreign: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { b[0] = 'X'; return b })
		}},
		{name: "newer format", reason: ReasonFormat, atOpen: true, foreign: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { b[4] = 9; return b })
		}},
		{name: "format version 1", reason: ReasonFormat, atOpen: true, foreign: true, damage: func(t *testing.T, p string) {
			mutate(t, p, toVersion1)
		}},
		{name: "unknown V layout", reason: ReasonFormat, atOpen: true, foreign: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { b[9] = 3; return resum(b) })
		}},
		{name: "flipped token byte", reason: ReasonHeader, atOpen: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { b[fixedLen+5] ^= 0x40; return b })
		}},
		{name: "flipped length byte", reason: ReasonHeader, atOpen: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { b[97] ^= 1; return b })
		}},
		{name: "another model", reason: ReasonModel, atOpen: true, foreign: true, cfg: func(c *Config) { c.Identity = "another model" }},
		{name: "another KV type", reason: ReasonKVType, atOpen: true, foreign: true, cfg: func(c *Config) { c.KVType = "q8_0" }},
		{name: "another V type", reason: ReasonKVType, atOpen: true, foreign: true, cfg: func(c *Config) { c.VType = "q8_0" }},
		{name: "another K type", reason: ReasonKVType, atOpen: true, foreign: true, cfg: func(c *Config) { c.KVType, c.VType = "q4_0", "f16" }},
		{name: "another V layout", reason: ReasonVLayout, atOpen: true, foreign: true, cfg: func(c *Config) { c.VLayout = VRows }},
		{name: "renamed", reason: ReasonTokens, atOpen: true, damage: func(t *testing.T, p string) {
			if err := os.Rename(p, filepath.Join(filepath.Dir(p), Name(toks(1, 3)))); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "digest does not match the tokens", reason: ReasonTokens, atOpen: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte {
				binary.LittleEndian.PutUint32(b[fixedLen:], 77) // a token changed, the header checksum redone
				hl := int(headerLen(len(tk), 0))
				binary.LittleEndian.PutUint32(b[hl-4:], crc32c(b[:hl-4]))
				return b
			})
		}},
		{name: "truncated payload", reason: ReasonTruncated, atOpen: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { return b[:len(b)-100] })
		}},
		{name: "truncated header", reason: ReasonTruncated, atOpen: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { return b[:fixedLen+10] })
		}},
		{name: "empty", reason: ReasonTruncated, atOpen: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { return nil })
		}},
		{name: "trailing bytes", reason: ReasonTruncated, atOpen: true, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { return append(b, 0) })
		}},
		{name: "flipped payload byte", reason: ReasonPayload, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte { b[len(b)-50] ^= 0x01; return b })
		}},
		{name: "payload that does not decode", reason: ReasonDecode, damage: func(t *testing.T, p string) {
			mutate(t, p, func(b []byte) []byte {
				hl := int(headerLen(len(tk), 0))
				bad := zstdOf([]byte("far too short"))
				b = append(b[:hl], bad...)
				binary.LittleEndian.PutUint64(b[96:], uint64(len(bad)))
				binary.LittleEndian.PutUint32(b[104:], crc32c(bad))
				binary.LittleEndian.PutUint32(b[hl-4:], crc32c(b[:hl-4]))
				return b
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, _ := parked(t, dir, tk, 9)
			if tc.damage != nil {
				tc.damage(t, path)
			}
			cfg := testConfig(dir)
			if tc.cfg != nil {
				tc.cfg(&cfg)
				sub := filepath.Join(dir, Subdir(cfg.Identity, cfg.CacheTypes(), cfg.VLayout))
				os.MkdirAll(sub, 0o755)
				if err := os.Rename(path, filepath.Join(sub, Name(tk))); err != nil {
					t.Fatal(err)
				}
			}
			s := open(t, cfg)
			if tc.atOpen {
				if n := len(s.List()); n != 0 {
					t.Fatalf("indexed %d files", n)
				}
			} else {
				if n := len(s.List()); n != 1 {
					t.Fatalf("the index reads headers only, yet refused the file (%d indexed)", n)
				}
				_, err := s.Load(tk, nil)
				if r, ok := ReasonOf(err); !ok || r != tc.reason || !errors.Is(err, ErrRefused) {
					t.Fatalf("load: %v, want a %s refusal", err, tc.reason)
				}
				if g := s.Gone(); !slices.Equal(g, []string{Name(tk)}) {
					t.Fatalf("gone %v", g)
				}
				if len(s.List()) != 0 {
					t.Fatal("a refused file stayed in the index")
				}
			}
			for r := range NumReasons {
				want := int64(0)
				if r == tc.reason {
					want = 1
				}
				if got := s.Stats().Refused[r].Load(); got != want {
					t.Errorf("refused[%s] = %d, want %d", r, got, want)
				}
			}
			ents, _ := os.ReadDir(s.Dir())
			var left []string
			for _, e := range ents {
				if e.Name() != "LOCK" {
					left = append(left, e.Name())
				}
			}
			if tc.foreign != (len(left) == 1) || len(left) > 1 {
				t.Errorf("left in the directory: %v (a foreign file stays, a damaged one goes)", left)
			}
		})
	}
}

// toVersion1 rewrites a park file's header as format version 1 wrote it:
// no V layout.
func toVersion1(b []byte) []byte {
	binary.LittleEndian.PutUint16(b[4:], 1)
	b[9] = 0
	return resum(b)
}

// resum recomputes a park file's header checksum.
func resum(b []byte) []byte {
	hl := int(headerLen(int(binary.LittleEndian.Uint32(b[12:])), int(binary.LittleEndian.Uint16(b[10:]))))
	binary.LittleEndian.PutUint32(b[hl-4:], crc32c(b[:hl-4]))
	return b
}

func TestLoadOfAMissingFileIsNotARefusal(t *testing.T) {
	dir := t.TempDir()
	path, _ := parked(t, dir, toks(1, 40), 1)
	s := open(t, testConfig(dir))
	os.Remove(path)
	_, err := s.Load(toks(1, 40), nil)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrRefused) {
		t.Fatalf("load: %v", err)
	}
	if len(s.List()) != 0 || len(s.Gone()) != 1 {
		t.Fatal("a missing file stayed indexed")
	}
}

func TestLoadChecksTheTokensAskedFor(t *testing.T) {
	dir := t.TempDir()
	tk := toks(1, 40)
	path, _ := parked(t, dir, tk, 1)
	other := toks(500, 40)
	// Another stream's file under this stream's name, appearing after
	// start-up (someone's copy): the header is checked against the name
	// and the tokens asked for.
	s := open(t, testConfig(dir))
	b, _ := os.ReadFile(path)
	os.WriteFile(filepath.Join(s.Dir(), Name(other)), b, 0o644)
	if _, err := s.Load(other, nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("load: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	for name, c := range map[string]Config{
		"no dir":        {Identity: "x", KVType: "f16", VLayout: VRows},
		"no identity":   {Dir: t.TempDir(), KVType: "f16", VLayout: VRows},
		"lossy q8_0":    {Dir: t.TempDir(), Identity: "x", KVType: "q8_0", VLayout: VRows, Lossy: true},
		"budget":        {Dir: t.TempDir(), Identity: "x", KVType: "f16", VLayout: VRows, Budget: -1},
		"no V layout":   {Dir: t.TempDir(), Identity: "x", KVType: "f16"},
		"bad V layout":  {Dir: t.TempDir(), Identity: "x", KVType: "f16", VLayout: 7},
		"path KV type":  {Dir: t.TempDir(), Identity: "x", KVType: "../f16", VLayout: VRows},
		"path V type":   {Dir: t.TempDir(), Identity: "x", KVType: "f16", VType: "a/b", VLayout: VRows},
		"dashed V type": {Dir: t.TempDir(), Identity: "x", KVType: "f16", VType: "q8-0", VLayout: VRows},
		"lossy q8_0 V":  {Dir: t.TempDir(), Identity: "x", KVType: "f16", VType: "q8_0", VLayout: VRows, Lossy: true},
		"empty KV type": {Dir: t.TempDir(), Identity: "x", VLayout: VRows},
	} {
		if s, err := Open(c); err == nil {
			s.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(testConfig(file)); err == nil {
		t.Error("a regular file accepted as the park directory")
	}
}

func zstdOf(b []byte) []byte {
	e, _ := zstd.NewWriter(nil)
	return e.EncodeAll(b, nil)
}
