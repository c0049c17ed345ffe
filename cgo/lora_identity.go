package cgo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// fileDigests is the hex sha256 of each file's whole content. LoRA
// adapters are hashed whole, not sampled as a model is
// (gguf.ModelDigest): two fine-tunes of one base share a header and may
// differ in any tensor, and an adapter is small enough (megabytes to a few
// hundred) to read once at load.
func fileDigests(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		d, err := fileDigest(p)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("digest %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
