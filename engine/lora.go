package engine

import (
	"fmt"
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
