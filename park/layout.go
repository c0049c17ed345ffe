package park

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// VLayout is how the engine lays out its V cache, which exported state
// carries as it is: llama.cpp stores V transposed (one row per channel)
// unless flash attention runs, when V is stored like K (one row per cell).
// A state exported under one layout cannot be imported under the other,
// so the layout is part of a park file's identity beside the model and
// the KV type.
type VLayout uint8

// V cache layouts. The zero value is no layout: Open refuses it.
const (
	VRows       VLayout = 1 // one row per cell, as K (flash attention on)
	VTransposed VLayout = 2 // transposed (flash attention off)
)

func (l VLayout) String() string {
	switch l {
	case VRows:
		return "vrows"
	case VTransposed:
		return "vtrans"
	}
	return fmt.Sprintf("vlayout%d", uint8(l))
}

func (l VLayout) valid() bool { return l == VRows || l == VTransposed }

// Subdir is the subdirectory of the park directory where one model
// identity parks: the first 12 hex digits of the model's identity, the
// KV type and the V layout, e.g. "5f2b9c0e7d41-f16-vrows". The prefix is
// for people reading the directory; every header carries the whole
// identity, and a file whose header names another is refused and left
// alone.
func Subdir(identity, kvType string, layout VLayout) string {
	id := modelID(identity)
	return hex.EncodeToString(id[:6]) + "-" + kvType + "-" + layout.String()
}

// stateVLayout reads the V layout an exported sequence was written with
// (the v_trans word of llama.cpp's sequence state; see lossy.go for the
// layout) from the blob's first bytes. errShort means the prefix is too
// short to tell; any other error, that it is not state this build can
// read — the caller then trusts the header alone.
func stateVLayout(blob []byte) (VLayout, error) {
	if len(blob) < engineHeaderLen+4 {
		return 0, shortf("an engine header")
	}
	if engineVersion(blob) == 0 {
		return 0, errEngineVersion
	}
	p := blob[engineHeaderLen:]
	p = p[llamaSeqPrefixLen(p):]
	u32 := func() (uint32, error) {
		if len(p) < 4 {
			return 0, shortf("a 4-byte field")
		}
		v := binary.LittleEndian.Uint32(p)
		p = p[4:]
		return v, nil
	}
	streams, err := u32()
	if err != nil {
		return 0, err
	}
	if streams > 1<<16 {
		return 0, fmt.Errorf("park: %d streams", streams)
	}
	for range streams {
		cells, err := u32()
		if err != nil {
			return 0, err
		}
		if cells == 0 {
			continue // an empty stream writes nothing more
		}
		for range cells {
			if _, err := u32(); err != nil { // position
				return 0, err
			}
			ids, err := u32()
			if err != nil {
				return 0, err
			}
			if uint64(len(p)) < 4*uint64(ids) {
				return 0, shortf("%d sequence ids", ids)
			}
			p = p[4*ids:]
		}
		vt, err := u32()
		if err != nil {
			return 0, err
		}
		switch vt {
		case 0:
			return VRows, nil
		case 1:
			return VTransposed, nil
		}
		return 0, fmt.Errorf("park: v_trans %d", vt)
	}
	return 0, errors.New("park: the exported state holds no cells")
}
