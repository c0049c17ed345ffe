package session

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenLog opens a store over any bytes as its log: it never panics,
// and what it keeps is a log that opens again with nothing to drop.
func FuzzOpenLog(f *testing.F) {
	seed, _, _, _ := logWithThreeAppends(f, f.TempDir())
	f.Add(seed)
	f.Add(seed[:len(seed)-5])
	f.Add(header(logMagic, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, walName(1)), b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := s.Stats()
		s.Close()
		s, err = Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got := s.Stats()
		if got.TornTails != 0 || got.Items != want.Items || got.Conversations != want.Conversations || got.Pins != want.Pins {
			t.Fatalf("second open differs: %+v then %+v", want, got)
		}
	})
}

// FuzzLoadSnapshot reads any bytes as a snapshot without panicking.
func FuzzLoadSnapshot(f *testing.F) {
	f.Add(header(snapMagic, 2))
	f.Add(appendRecord(header(snapMagic, 2), []byte{byte(opSnapEnd), '{', '}'}))
	f.Add(appendRecord(header(snapMagic, 2), []byte{byte(opSnapConv), '{', '"', 'r', '"', ':', '[', '"', 'x', '"', ']', '}'}))
	f.Fuzz(func(t *testing.T, b []byte) {
		loadSnapshot(bytes.NewReader(b), int64(len(b)))
	})
}
