package app

import (
	"os"
	"strings"

	"superfluid/cgo"
	"superfluid/engine"
	"superfluid/pull"
	"superfluid/task"
)

// A model's projector (vision, audio or both): --mmproj FILE for the default model, else a
// file named <model>.mmproj.gguf beside the model's GGUF (foo.gguf →
// foo.mmproj.gguf), found at load. A projector that does not pair with the
// model (another text width, M-RoPE) fails the load, saying why.

// mmprojFor is spec's projector path, or "" when it has none.
func mmprojFor(spec ModelSpec) string {
	if spec.MMProj != "" {
		return spec.MMProj
	}
	beside := strings.TrimSuffix(spec.Path, pull.Ext) + pull.ProjectorExt
	if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() && beside != spec.Path {
		return beside
	}
	return ""
}

// projector adapts the cgo binding to the request core's task.Projector.
type projector struct{ m *cgo.Media }

func (p projector) Marker() string { return p.m.Marker() }

func (p projector) Modalities() (vision, audio bool) { return p.m.Vision(), p.m.Audio() }

func (p projector) AudioWindowRows() int { return p.m.AudioWindowRows() }

func (p projector) AudioRefused() string { return p.m.AudioRefused() }

func (p projector) TokenizeMedia(text string, images [][]byte, addSpecial bool) (task.MediaChunks, error) {
	mp, err := p.m.Tokenize(text, images, addSpecial)
	if err != nil {
		return nil, err
	}
	chunks := make([]task.MediaChunk, len(mp.Chunks))
	for i, c := range mp.Chunks {
		chunks[i] = task.MediaChunk{Tokens: c.Tokens, Rows: c.Rows, Digest: c.Digest, Segment: c.Segment}
		if c.Kind == cgo.MediaText && c.Tokens == nil {
			chunks[i].Tokens = []engine.Token{}
		}
	}
	return &mediaChunks{m: p.m, p: mp, chunks: chunks}, nil
}

type mediaChunks struct {
	m      *cgo.Media
	p      *cgo.MediaPrompt
	chunks []task.MediaChunk
}

func (c *mediaChunks) Chunks() []task.MediaChunk { return c.chunks }

func (c *mediaChunks) Encode(i int) ([]float32, error) { return c.m.Encode(c.p, i, nil) }

func (c *mediaChunks) Free() { c.p.Free() }
