package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
)

// MaxLoRAScale is the largest |scale| a step may give a LoRA adapter
// (native SF_MAX_LORA_SCALE): past it the adapter's delta swamps the
// weights, and ±inf or NaN would poison every logit.
const MaxLoRAScale = 100

// CheckLoRAScales refuses a step's adapter scales the engine would refuse:
// not one per loaded adapter (none is allowed: no adapter), or a scale that
// is not finite or past MaxLoRAScale.
func CheckLoRAScales(scales []float32, adapters int) error {
	if len(scales) == 0 {
		return nil
	}
	if len(scales) != adapters {
		return fmt.Errorf("%d LoRA scales for %d adapters", len(scales), adapters)
	}
	for i, s := range scales {
		if math.IsNaN(float64(s)) || math.Abs(float64(s)) > MaxLoRAScale {
			return fmt.Errorf("LoRA adapter %d scale %g outside [-%d, %d]", i, s, MaxLoRAScale, MaxLoRAScale)
		}
	}
	return nil
}

// AdapterSetID names a LoRA adapter set the same way in every process: a
// stream computed under it is keyed (and parked) under this name, so a
// restart with the same adapters at the same scales finds it again and
// any other set does not. Zero is the base model (no adapter).
type AdapterSetID [12]byte

// IsBase reports whether id is the base model's.
func (id AdapterSetID) IsBase() bool { return id == AdapterSetID{} }

// String is id in hex.
func (id AdapterSetID) String() string { return hex.EncodeToString(id[:]) }

// AdapterSetOf is the name of the set that applies scales to the adapters
// whose file digests are files (Descriptor.LoRAIdentity, in load order):
// the first 12 bytes of a sha256 over each applied adapter's digest and
// scale. An adapter at scale zero applies nothing and is left out, so the
// name does not depend on which unused adapters were loaded beside; the
// order of the applied ones is kept (llama.cpp sums their deltas in load
// order, which rounding can tell apart). All zero is the base model; a
// scale without a digest (an engine that gave none) is keyed by its
// position alone.
func AdapterSetOf(files []string, scales []float32) AdapterSetID {
	h := sha256.New()
	applied := false
	for i, s := range scales {
		if s == 0 {
			continue
		}
		applied = true
		file := fmt.Sprintf("adapter %d", i)
		if i < len(files) {
			file = files[i]
		}
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(s))
		io.WriteString(h, file)
		h.Write([]byte{0})
		h.Write(b[:])
	}
	var id AdapterSetID
	if applied {
		copy(id[:], h.Sum(nil))
	}
	return id
}
