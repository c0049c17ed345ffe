package task

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestAdaptersScales(t *testing.T) {
	a := NewAdapters([]string{"a.gguf", "b.gguf"}, []float32{0, 0.5})
	if g := a.Global(); !slices.Equal(g, []float32{0, 0.5}) {
		t.Errorf("global %v", g)
	}
	if s, err := a.ForRequest(nil, "lora"); err != nil || s != nil || !slices.Equal(a.Resolve(s), []float32{0, 0.5}) {
		t.Errorf("naming none: %v %v, resolved %v", s, err, a.Resolve(s))
	}
	if s, err := a.ForRequest([]LoRAEntry{}, "lora"); err != nil || !slices.Equal(s, []float32{0, 0}) || !slices.Equal(a.Resolve(s), s) {
		t.Errorf("an empty list (every adapter at 0): %v %v", s, err)
	}
	if s, err := a.ForRequest([]LoRAEntry{{ID: 0, Scale: 1}, {ID: 0, Scale: 2}}, "lora"); err != nil || !slices.Equal(s, []float32{2, 0}) {
		t.Errorf("an id twice (the last wins, as llama-server's map): %v %v", s, err)
	}
	for _, bad := range [][]LoRAEntry{{{ID: 2, Scale: 1}}, {{ID: -1}}, {{ID: 0, Scale: math.NaN()}}, {{ID: 1, Scale: 101}}, {{ID: 1, Scale: math.Inf(-1)}}} {
		_, err := a.ForRequest(bad, "lora")
		var te *Error
		if !errors.As(err, &te) || te.Param != "lora" {
			t.Errorf("%v: %v", bad, err)
		}
		if err := a.SetGlobal(bad, "lora"); err == nil {
			t.Errorf("SetGlobal %v accepted", bad)
		}
	}
	if err := a.SetGlobal([]LoRAEntry{{ID: 1, Scale: -2}}, "lora"); err != nil {
		t.Fatal(err)
	}
	if l := a.List(); l[0].Scale != 0 || l[1].Scale != -2 || l[1].Path != "b.gguf" || l[1].ID != 1 {
		t.Errorf("after SetGlobal: %+v", l)
	}
	var none *Adapters
	if s, err := none.ForRequest(nil, "lora"); s != nil || err != nil || none.Resolve(nil) != nil {
		t.Errorf("no adapters, none named: %v %v", s, err)
	}
	if _, err := none.ForRequest([]LoRAEntry{{ID: 0, Scale: 1}}, "lora"); err == nil {
		t.Error("no adapters, one named: accepted")
	}
}
