package task

import (
	"math"
	"slices"
	"sync"

	"superfluid/engine"
)

// Adapters are a model's LoRA adapters as llama-server serves them: loaded
// with the model (--lora FILE[:SCALE]), listed and given global scales by
// /lora-adapters, and chosen per request by the llama.cpp field
// "lora": [{"id", "scale"}]. A request that names no adapter runs under the
// global scales; one that names some runs under those (the others at 0).
// Any goroutine may call its methods.
type Adapters struct {
	paths []string

	mu     sync.Mutex
	scales []float32 // global
}

// Adapter is one loaded adapter as /lora-adapters lists it.
type Adapter struct {
	ID    int     `json:"id"`
	Path  string  `json:"path"`
	Scale float32 `json:"scale"`
}

// LoRAEntry is one entry of a request's lora list (or of a POST to
// /lora-adapters): an adapter's id and the scale it runs at.
type LoRAEntry struct {
	ID    int64
	Scale float64
}

// NewAdapters holds the adapters loaded from paths (the engine's order)
// at their initial global scales.
func NewAdapters(paths []string, scales []float32) *Adapters {
	return &Adapters{paths: slices.Clone(paths), scales: slices.Clone(scales)}
}

// List is every adapter with its global scale.
func (a *Adapters) List() []Adapter {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Adapter, len(a.paths))
	for i, p := range a.paths {
		out[i] = Adapter{ID: i, Path: p, Scale: a.scales[i]}
	}
	return out
}

// Global is the scales a request that names no adapter runs under: nil
// when every one is 0.
func (a *Adapters) Global() []float32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return scalesOrNil(a.scales)
}

// SetGlobal makes entries the global scales (an adapter not named gets 0,
// as llama-server's POST /lora-adapters does). Requests already running
// keep the scales they started with.
func (a *Adapters) SetGlobal(entries []LoRAEntry, field string) error {
	s, err := a.scalesOf(entries, field)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.scales = s
	return nil
}

// ForRequest is the scales a request names for Spec.LoRA: nil when it
// names none (entries nil: the global scales apply, Resolve), else one per
// adapter, those it leaves out at 0 (all 0 for an empty list: none).
func (a *Adapters) ForRequest(entries []LoRAEntry, field string) ([]float32, error) {
	if a == nil {
		if len(entries) > 0 {
			return nil, BadParam(field, "%s names adapters, but this model was loaded with no LoRA adapter (serve --lora)", field)
		}
		return nil, nil
	}
	if entries == nil {
		return nil, nil
	}
	return a.scalesOf(entries, field)
}

// Resolve is the scales a generation runs under: those its request named
// (Spec.LoRA not nil), else the global ones at this moment — so every API,
// with a lora field or without, follows POST /lora-adapters.
func (a *Adapters) Resolve(named []float32) []float32 {
	if a == nil || named != nil {
		return named
	}
	return a.Global()
}

// scalesOf checks entries against the adapters: an id that names none, a
// scale that is not finite or past engine.MaxLoRAScale are refused.
func (a *Adapters) scalesOf(entries []LoRAEntry, field string) ([]float32, error) {
	s := make([]float32, len(a.paths))
	for i, e := range entries {
		if e.ID < 0 || e.ID >= int64(len(a.paths)) {
			return nil, BadParam(field, "%s[%d]: no adapter has id %d; this model has %d (ids 0 to %d, GET /lora-adapters)", field, i, e.ID, len(a.paths), len(a.paths)-1)
		}
		if math.IsNaN(e.Scale) || math.Abs(e.Scale) > engine.MaxLoRAScale {
			return nil, BadParam(field, "%s[%d]: scale %g is outside [-%d, %d]", field, i, e.Scale, engine.MaxLoRAScale, engine.MaxLoRAScale)
		}
		s[e.ID] = float32(e.Scale)
	}
	return s, nil
}

func scalesOrNil(s []float32) []float32 {
	for _, x := range s {
		if x != 0 {
			return slices.Clone(s)
		}
	}
	return nil
}
