package pull

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"superfluid/flock"
)

// ErrNotFound is wrapped by Find when the directory holds no model of the
// name.
var ErrNotFound = errors.New("no such model")

// ErrPulling is wrapped by Remove when a pull of the model is running.
var ErrPulling = errors.New("a pull of it is running")

// ErrBadName is wrapped by Find when the name is no model name at all: a
// path, or something that could reach outside the models directory.
var ErrBadName = errors.New("not a model name")

// Find returns the path of the model in dir that name names: a local name
// (with or without .gguf), or a reference a model in dir was pulled from.
// Unlike Resolve it never looks outside dir, so it is safe for names a
// client sends. A model whose download is unfinished (only
// NAME.gguf.partial exists) is found too: deleting it frees its space.
func Find(dir, name string) (string, error) {
	if looksLikeRef(name) {
		if strings.ContainsRune(name, 0) {
			return "", fmt.Errorf("%q: %w", name, ErrBadName)
		}
		ref, err := ParseRef(name)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrBadName, err)
		}
		p, err := resolveRef(ref, name, dir)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNotFound, err)
		}
		return p, nil
	}
	if err := checkLocalName(name); err != nil {
		return "", err
	}
	file := name
	if !strings.HasSuffix(file, Ext) {
		file += Ext
	}
	p := filepath.Join(dir, file)
	for _, candidate := range []string{p, p + ".partial"} {
		if fi, err := os.Lstat(candidate); err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
			return p, nil
		}
	}
	return "", fmt.Errorf("model %q is not in %s: %w", name, dir, ErrNotFound)
}

// checkLocalName refuses a name that is not one file of the directory:
// empty, over 255 bytes, with a separator, NUL, or a leading dot (which
// also covers "." and "..").
func checkLocalName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("an empty name: %w", ErrBadName)
	case len(name) > 255:
		return fmt.Errorf("a name of %d bytes: %w", len(name), ErrBadName)
	case strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, "."):
		return fmt.Errorf("%q names a path, not a model (want a name as `superfluid models` lists it): %w", name, ErrBadName)
	}
	return nil
}

// Remove deletes the model at path (as Find returned it) and everything
// pulled beside it: its manifest and an unfinished download with its
// state. A pull of the model that is running (it holds the partial file's
// lock) makes Remove refuse and change nothing.
func Remove(path string) error {
	partial := path + ".partial"
	if f, err := os.OpenFile(partial, os.O_RDWR, 0); err == nil {
		err := flock.Try(f)
		defer f.Close() // the lock, if taken, lasts until the files are gone
		if err != nil {
			return fmt.Errorf("pull: %s: %w (%v); cancel it first", strings.TrimSuffix(filepath.Base(path), Ext), ErrPulling, err)
		}
	}
	var errs []error
	for _, p := range []string{path, manifestPath(path), partial, partial + ".json"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	syncDir(filepath.Dir(path))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pull: removing %s: %w", path, err)
	}
	return nil
}
