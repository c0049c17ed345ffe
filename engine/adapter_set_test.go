package engine

import "testing"

// A set's name depends on the applied adapters' files and scales only: no
// scale applied is the base model; an adapter at scale 0 loaded beside
// changes nothing; another scale, another file or another order of the
// applied ones is another set.
func TestAdapterSetOf(t *testing.T) {
	files := []string{"aaaa", "bbbb"}
	one := AdapterSetOf(files, []float32{1, 0})
	cases := []struct {
		name  string
		id    AdapterSetID
		equal bool
	}{
		{"nothing applied is the base", AdapterSetOf(files, []float32{0, 0}), false},
		{"the same again", AdapterSetOf(files, []float32{1, 0}), true},
		{"an unused adapter beside", AdapterSetOf([]string{"aaaa", "cccc"}, []float32{1, 0}), true},
		{"the adapter alone", AdapterSetOf([]string{"aaaa"}, []float32{1}), true},
		{"another scale", AdapterSetOf(files, []float32{0.5, 0}), false},
		{"another file", AdapterSetOf([]string{"cccc", "bbbb"}, []float32{1, 0}), false},
		{"both applied", AdapterSetOf(files, []float32{1, 1}), false},
	}
	for _, c := range cases {
		if (c.id == one) != c.equal {
			t.Errorf("%s: %s, the one set %s", c.name, c.id, one)
		}
	}
	if !AdapterSetOf(files, nil).IsBase() || !AdapterSetOf(files, []float32{0, 0}).IsBase() || one.IsBase() {
		t.Error("the base model's name")
	}
	if AdapterSetOf(files, []float32{1, 1}) == AdapterSetOf([]string{"bbbb", "aaaa"}, []float32{1, 1}) {
		t.Error("the order of the applied adapters is not in the name")
	}
}
