package ollama

import (
	"sync"
	"time"

	"superfluid/gguf"
	"superfluid/http/wire"
)

// storedKey names one version of a file: a model pulled again under the
// same name has another size or time.
type storedKey struct {
	path     string
	size     int64
	modified time.Time
}

// storedDetailsCache keeps each directory model's details, per server (no
// process global): its GGUF header takes tens of milliseconds to parse
// (the vocabulary), and /api/tags is polled. Bounded by the directory's
// contents; a replaced file's entry stays behind, a few hundred bytes.
type storedDetailsCache struct {
	m sync.Map // storedKey → details
}

// storedDetails is what /api/tags says of a directory model, read from its
// header; a file that does not parse is listed as GGUF of unknown kind.
func (c *storedDetailsCache) of(e wire.ModelEntry) details {
	key := storedKey{e.Path, e.Size, e.Modified}
	if d, ok := c.m.Load(key); ok {
		return d.(details)
	}
	d := details{Format: "gguf", QuantizationLevel: "unknown"}
	if f, err := gguf.Open(e.Path); err == nil {
		arch, _ := f.String("general.architecture")
		d.Family, d.Families = arch, []string{arch}
		if n, ok := f.Uint64("general.parameter_count"); ok {
			d.ParameterSize = humanNumber(n)
		}
		d.QuantizationLevel = f.QuantizationLevel()
	}
	c.m.Store(key, d)
	return d
}
