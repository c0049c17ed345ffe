package park

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"superfluid/engine"
)

func testCheckpoints(seed byte) []engine.Checkpoint {
	return []engine.Checkpoint{
		{Pos: 16, Blob: bytes.Repeat([]byte{seed, 1, 2, 3}, 300)},
		{Pos: 40, Blob: bytes.Repeat([]byte{seed, 9}, 777)},
	}
}

// A stream parked with its checkpoints is restored with them, byte for
// byte, and the start-up index knows their positions; checkpoints past the
// stream or out of order are not parked.
func TestCheckpointsAreParkedAndRestored(t *testing.T) {
	dir := t.TempDir()
	s := open(t, testConfig(dir))
	tk := toks(1, 40)
	blob := stateBlob(len(tk), 2, 64, true, ggmlF16, 3)
	cps := append(testCheckpoints(5), engine.Checkpoint{Pos: 41, Blob: []byte("past the end")})
	if !s.PutWith(tk, blob, cps, nil, false) {
		t.Fatal("put dropped")
	}
	s = flush(t, s)
	if m := s.List(); len(m) != 1 || !slices.Equal(m[0].Checkpoints, []int{16, 40}) {
		t.Fatalf("index %+v", m)
	}
	raw, got, err := s.LoadWith(tk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, blob) || len(got) != 2 {
		t.Fatalf("restored %d bytes and %d checkpoints", len(raw), len(got))
	}
	for i, cp := range testCheckpoints(5) {
		if got[i].Pos != cp.Pos || !bytes.Equal(got[i].Blob, cp.Blob) {
			t.Fatalf("checkpoint %d: at %d, %d bytes", i, got[i].Pos, len(got[i].Blob))
		}
	}
}

// A flipped bit in a checkpoint's payload refuses the whole file (it is
// removed), as damage to the state does; a damaged table refuses it at
// start-up.
func TestDamagedCheckpointRefusesTheFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason Reason
		damage func(b []byte) []byte
	}{
		{"payload", ReasonPayload, func(b []byte) []byte { b[len(b)-10] ^= 0x04; return b }},
		{"position past the stream", ReasonHeader, func(b []byte) []byte {
			table := int(headerLen(40, 0)) - 4
			binary.LittleEndian.PutUint32(b[table+4:], 41)
			return resum(b)
		}},
		{"unknown kind", ReasonFormat, func(b []byte) []byte {
			b[int(headerLen(40, 0))-4] = 9
			return resum(b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, testConfig(dir))
			tk := toks(1, 40)
			if !s.PutWith(tk, stateBlob(len(tk), 2, 64, true, ggmlF16, 3), testCheckpoints(7), nil, false) {
				t.Fatal("put dropped")
			}
			s.Close()
			mutate(t, filepath.Join(s.Dir(), Name(tk)), tc.damage)
			s = open(t, testConfig(dir))
			_, _, err := s.LoadWith(tk, nil)
			if r, ok := ReasonOf(err); len(s.List()) != 0 && (!ok || r != tc.reason) {
				t.Fatalf("load: %v, want a %s refusal", err, tc.reason)
			}
			if len(s.List()) == 0 && s.Stats().Refused[tc.reason].Load() != 1 {
				t.Fatalf("refused at start-up, but not for %s", tc.reason)
			}
		})
	}
}

// A version 2 file (before checkpoints) is still read, without any.
func TestVersion2FilesAreStillRead(t *testing.T) {
	dir := t.TempDir()
	tk := toks(1, 40)
	path, blob := parked(t, dir, tk, 4)
	mutate(t, path, func(b []byte) []byte {
		binary.LittleEndian.PutUint16(b[4:], spacelessVersion)
		return resum(b)
	})
	s := open(t, testConfig(dir))
	raw, cps, err := s.LoadWith(tk, nil)
	if err != nil || !bytes.Equal(raw, blob) || cps != nil {
		t.Fatalf("version 2: %d bytes, %d checkpoints, %v", len(raw), len(cps), err)
	}
	// A version 2 header naming checkpoints is not one version 2 wrote.
	mutate(t, path, func(b []byte) []byte {
		binary.LittleEndian.PutUint16(b[10:], 1)
		return resum(b)
	})
	s = flush(t, s)
	if _, _, err := s.LoadWith(tk, nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("version 2 with a checkpoint count: %v", err)
	}
}
