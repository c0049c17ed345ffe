package pull

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Ext is the extension of model files; a model's name is its file name
// without it.
const Ext = ".gguf"

// ProjectorExt names a model's vision projector beside it: foo.gguf's is
// foo.mmproj.gguf.
const ProjectorExt = ".mmproj.gguf"

// manifest is NAME.gguf.json, written beside a pulled model.
type manifest struct {
	// Ref is the reference as the user gave it (canonicalized), Source
	// the file it resolved to (hf.co/ORG/REPO:FILE or the URL).
	Ref    string `json:"ref"`
	Source string `json:"source"`
	URL    string `json:"url"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// ETag identifies the remote version for the up-to-date check: Hugging
	// Face's X-Linked-Etag (or ETag), else the download's ETag.
	ETag     string    `json:"etag,omitempty"`
	PulledAt time.Time `json:"pulled_at"`
}

func manifestPath(model string) string { return model + ".json" }

func readManifest(model string) (*manifest, error) {
	b, err := os.ReadFile(manifestPath(model))
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestPath(model), err)
	}
	return &m, nil
}

// Entry is a model in a models directory.
type Entry struct {
	Name     string    `json:"name"` // the file name without .gguf
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	// Source, Ref, SHA256 and PulledAt come from the manifest of a pulled
	// model; a file copied in by hand has none.
	Source   string     `json:"source,omitempty"`
	Ref      string     `json:"ref,omitempty"`
	SHA256   string     `json:"sha256,omitempty"`
	PulledAt *time.Time `json:"pulled_at,omitempty"`
}

// List returns the models in dir sorted by name: every *.gguf file, with
// its manifest's facts when it was pulled, but a vision projector
// (*.mmproj.gguf, which loads beside its model: app/media.go). A missing
// dir holds none.
func List(dir string) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, Ext) || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ProjectorExt) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p) // follows symlinks: a linked model is listed
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		e := Entry{Name: strings.TrimSuffix(name, Ext), Path: p, Size: fi.Size(), Modified: fi.ModTime()}
		if m, err := readManifest(p); err == nil {
			e.Source, e.Ref, e.SHA256 = m.Source, m.Ref, m.SHA256
			if !m.PulledAt.IsZero() {
				t := m.PulledAt
				e.PulledAt = &t
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Resolve turns a --model argument into a file path: an existing file is
// itself; otherwise a model of that name (with or without .gguf) in dir;
// otherwise a reference a model in dir was pulled from. Anything else is
// an error that says how to get the model.
func Resolve(arg, dir string) (string, error) {
	if arg == "" {
		return "", errors.New("no model given")
	}
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		return arg, nil
	}
	if !strings.ContainsAny(arg, `/\`) && dir != "" {
		for _, p := range []string{filepath.Join(dir, arg+Ext), filepath.Join(dir, arg)} {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && strings.HasSuffix(p, Ext) {
				return p, nil
			}
		}
	}
	if looksLikeRef(arg) {
		ref, err := ParseRef(arg)
		if err != nil {
			return "", err
		}
		return resolveRef(ref, arg, dir)
	}
	return "", fmt.Errorf("model %q: no such file, and no model of that name in %s (`superfluid models` lists them; `superfluid pull REF` fetches one)", arg, dir)
}

func looksLikeRef(s string) bool {
	l := strings.ToLower(s)
	for _, p := range []string{"hf.co/", "huggingface.co/", "http://", "https://"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// resolveRef finds the model in dir pulled from what ref names, asked for
// either by the reference it was pulled with or by the file it resolved to.
func resolveRef(ref Ref, arg, dir string) (string, error) {
	entries, err := List(dir)
	if err != nil {
		return "", err
	}
	var hits []Entry
	for _, e := range entries {
		for _, s := range []string{e.Ref, e.Source} {
			if src, err := ParseRef(s); s != "" && err == nil && (ref.matches(src) || s == ref.String()) {
				hits = append(hits, e)
				break
			}
		}
	}
	switch len(hits) {
	case 1:
		return hits[0].Path, nil
	case 0:
		return "", fmt.Errorf("model %q has not been pulled into %s (`superfluid pull %s` fetches it)", arg, dir, arg)
	}
	names := make([]string, len(hits))
	for i, e := range hits {
		names[i] = e.Name
	}
	return "", fmt.Errorf("model %q matches %d pulled models (%s); give the name", arg, len(hits), strings.Join(names, ", "))
}

// FormatSize renders a byte count in decimal units: 812 B, 12.0 kB,
// 491.4 MB, 4.7 GB.
func FormatSize(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		f /= 1000
		if f < 999.95 || u == "TB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return "" // unreachable
}
