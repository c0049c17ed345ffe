package gguf

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// DigestSampleBytes is how much of each end of the tensor data region
// ModelDigest hashes.
const DigestSampleBytes = 64 << 10

// ModelDigest returns a cheap identity for the model file at path: the hex
// SHA-256 of the raw header, metadata and tensor descriptors, the first and
// the last 64 KiB of the tensor data region, and the file size. It reads at
// most the header plus 128 KiB, so it costs milliseconds even for a
// multi-gigabyte model, yet any change to metadata, shapes, size or the
// weights at either end of the file changes it. It is an identity, not an
// integrity check: a change confined to the middle of the data goes unseen.
func ModelDigest(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return "", fmt.Errorf("gguf: %w", err)
	}
	f, err := decode(fh)
	if err != nil {
		return "", fmt.Errorf("gguf: %s: %w", path, err)
	}
	size := st.Size()

	h := sha256.New()
	io.WriteString(h, "superfluid-gguf-digest-v1\x00")
	head := min(f.HeaderSize, size)
	if err := hashRange(h, fh, 0, head); err != nil {
		return "", fmt.Errorf("gguf: digest %s: %w", path, err)
	}
	data := min(f.DataOffset, size)
	first := min(size-data, DigestSampleBytes)
	if err := hashRange(h, fh, data, first); err != nil {
		return "", fmt.Errorf("gguf: digest %s: %w", path, err)
	}
	lastStart := max(data, size-DigestSampleBytes)
	if err := hashRange(h, fh, lastStart, size-lastStart); err != nil {
		return "", fmt.Errorf("gguf: digest %s: %w", path, err)
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	h.Write(n[:])
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashRange feeds n bytes of r starting at off into h.
func hashRange(h io.Writer, r io.ReaderAt, off, n int64) error {
	if n <= 0 {
		return nil
	}
	got, err := io.Copy(h, bufio.NewReaderSize(io.NewSectionReader(r, off, n), 1<<16))
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("read %d of %d bytes at offset %d: %w", got, n, off, ErrTruncated)
	}
	return nil
}
