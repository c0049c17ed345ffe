package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"superfluid/engine"
)

// fakeEngine keeps sequences as token lists; exported state is the tokens.
type fakeEngine struct {
	seqs      [][]engine.Token
	desc      engine.Descriptor
	copies    int
	imports   int
	exports   int
	importErr error // when set, Import fails with it
	// heldAtImport is how many tokens the other sequences held at the
	// last Import: what the imported cells land beside.
	heldAtImport int
}

func newFakeEngine(n int) *fakeEngine {
	return &fakeEngine{seqs: make([][]engine.Token, n), desc: engine.Descriptor{Seqs: n, PartialTruncation: true, Identity: "fake model", CacheTypeK: "f16", CacheTypeV: "f16"}}
}

func (f *fakeEngine) Descriptor() *engine.Descriptor { return &f.desc }
func (f *fakeEngine) Tick(*engine.Plan) (*engine.Events, error) {
	return nil, errors.New("fake: no ticks here")
}

func (f *fakeEngine) check(s int32) error {
	if s < 0 || int(s) >= len(f.seqs) {
		return engine.ErrSeqRange
	}
	return nil
}

func (f *fakeEngine) CopyPrefix(src, dst int32, n int) error {
	if err := errors.Join(f.check(src), f.check(dst)); err != nil {
		return err
	}
	if n > len(f.seqs[src]) {
		return fmt.Errorf("fake: copy %d of %d", n, len(f.seqs[src]))
	}
	f.copies++
	f.seqs[dst] = slices.Clone(f.seqs[src][:n])
	return nil
}

func (f *fakeEngine) Truncate(s int32, keep int) error {
	if err := f.check(s); err != nil {
		return err
	}
	if keep < len(f.seqs[s]) {
		f.seqs[s] = f.seqs[s][:keep]
	}
	return nil
}

func (f *fakeEngine) Free(s int32) error {
	if err := f.check(s); err != nil {
		return err
	}
	f.seqs[s] = nil
	return nil
}

func (f *fakeEngine) SeqLen(s int32) int { return len(f.seqs[s]) }

func (f *fakeEngine) Export(s int32, dst []byte) ([]byte, error) {
	f.exports++
	dst = append(dst, 'F', 'K')
	for _, t := range f.seqs[s] {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(t))
	}
	return dst, nil
}

func (f *fakeEngine) Import(s int32, data []byte) (int, error) {
	if f.importErr != nil {
		return 0, f.importErr
	}
	if len(data) < 2 || data[0] != 'F' || data[1] != 'K' || (len(data)-2)%4 != 0 {
		return 0, engine.ErrState
	}
	f.imports++
	f.heldAtImport = 0
	for o, toks := range f.seqs {
		if int32(o) != s {
			f.heldAtImport += len(toks)
		}
	}
	var toks []engine.Token
	for i := 2; i < len(data); i += 4 {
		toks = append(toks, engine.Token(binary.LittleEndian.Uint32(data[i:])))
	}
	f.seqs[s] = toks
	return len(toks), nil
}

// fill makes seq hold tokens, as a lane's prefill would.
func (f *fakeEngine) fill(s int32, tokens []engine.Token) { f.seqs[s] = slices.Clone(tokens) }

// tailEngine is the fake engine with tails (engine.TailState): a tail blob
// is "FT", the position it starts at, then its tokens.
type tailEngine struct {
	*fakeEngine
	tailExports, tailImports int
}

func newTailEngine(n int) *tailEngine { return &tailEngine{fakeEngine: newFakeEngine(n)} }

func (f *tailEngine) ExportTail(s int32, from int, dst []byte) ([]byte, error) {
	if err := f.check(s); err != nil {
		return dst, err
	}
	if from < 1 || from >= len(f.seqs[s]) {
		return dst, fmt.Errorf("fake: a tail from %d of %d tokens", from, len(f.seqs[s]))
	}
	f.tailExports++
	dst = append(dst, 'F', 'T')
	dst = binary.LittleEndian.AppendUint32(dst, uint32(from))
	for _, t := range f.seqs[s][from:] {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(t))
	}
	return dst, nil
}

func (f *tailEngine) ImportTail(s int32, data []byte) (int, error) {
	if err := f.check(s); err != nil {
		return 0, err
	}
	if len(data) < 6 || data[0] != 'F' || data[1] != 'T' || (len(data)-6)%4 != 0 {
		return 0, engine.ErrState
	}
	if from := int(binary.LittleEndian.Uint32(data[2:])); from != len(f.seqs[s]) {
		return 0, fmt.Errorf("fake: a tail from %d onto %d tokens", from, len(f.seqs[s]))
	}
	f.tailImports++
	for i := 6; i < len(data); i += 4 {
		f.seqs[s] = append(f.seqs[s], engine.Token(binary.LittleEndian.Uint32(data[i:])))
	}
	return len(f.seqs[s]), nil
}
