package grammar

import (
	"fmt"
	"math/big"
	"math/rand"
	"testing"
)

func schemaGrammar(t *testing.T, schema string, opts Options) *Grammar {
	t.Helper()
	text, err := FromJSONSchema([]byte(schema), opts)
	if err != nil {
		t.Fatalf("FromJSONSchema(%s): %v", schema, err)
	}
	return mustGrammar(t, text)
}

func TestIntegerRange17to1234(t *testing.T) {
	g := schemaGrammar(t, `{"type":"integer","minimum":17,"maximum":1234}`, Options{})
	for n := -50; n <= 1400; n++ {
		if got, want := g.Accepts(fmt.Sprint(n)), n >= 17 && n <= 1234; got != want {
			t.Errorf("%d: accepted=%v, want %v", n, got, want)
		}
	}
	checkAccepts(t, g, nil, []string{"017", "17.0", "1e2", "+20", "", "-0"})
}

// TestIntegerRangesRandom checks exact integer ranges against every
// integer near them, for seeded random bounds of every sign and kind.
func TestIntegerRangesRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	for i := 0; i < 60; i++ {
		lo, hi := rng.Intn(2400)-1200, rng.Intn(2400)-1200
		if lo > hi {
			lo, hi = hi, lo
		}
		loKw, hiKw := "minimum", "maximum"
		loX, hiX := rng.Intn(2) == 0, rng.Intn(2) == 0
		if loX {
			loKw = "exclusiveMinimum"
		}
		if hiX {
			hiKw = "exclusiveMaximum"
		}
		schema := fmt.Sprintf(`{"type":"integer","%s":%d,"%s":%d}`, loKw, lo, hiKw, hi)
		if i%5 == 0 {
			schema = fmt.Sprintf(`{"type":"integer","%s":%d}`, loKw, lo)
			hi = 1 << 30
		}
		text, err := FromJSONSchema([]byte(schema), Options{})
		empty := lo > hi || (lo == hi && (loX || hiX)) || (lo+1 == hi && loX && hiX)
		if empty {
			if err != ErrUnsatisfiable {
				t.Errorf("%s: want ErrUnsatisfiable, got %v", schema, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		g := mustGrammar(t, text)
		for n := -1300; n <= 1300; n++ {
			want := (n > lo || !loX && n == lo) && (n < hi || !hiX && n == hi)
			if got := g.Accepts(fmt.Sprint(n)); got != want {
				t.Fatalf("%s: %d accepted=%v, want %v", schema, n, got, want)
			}
		}
	}
}

func TestIntegerBigBounds(t *testing.T) {
	g := schemaGrammar(t, `{"type":"integer","minimum":-99999999999999999999,"maximum":100000000000000000000}`, Options{})
	checkAccepts(t, g,
		[]string{"0", "-99999999999999999999", "100000000000000000000", "12345678901234567890"},
		[]string{"-100000000000000000000", "100000000000000000001", "1000000000000000000000"})
	g = schemaGrammar(t, `{"type":"integer","exclusiveMinimum":2.5,"maximum":7.9}`, Options{})
	checkAccepts(t, g, []string{"3", "7"}, []string{"2", "8", "2.5", "3.0"})
}

// TestNumberRangesRandom checks decimal ranges (bounds with up to three
// decimals, either end exclusive) against numbers with up to four decimals,
// some written with trailing zeros.
func TestNumberRangesRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 40; i++ {
		lo := big.NewRat(int64(rng.Intn(6000)-3000), 1000)
		hi := big.NewRat(int64(rng.Intn(6000)-3000), 1000)
		if lo.Cmp(hi) > 0 {
			lo, hi = hi, lo
		}
		loX, hiX := rng.Intn(2) == 0, rng.Intn(2) == 0
		loKw, hiKw := "minimum", "maximum"
		if loX {
			loKw = "exclusiveMinimum"
		}
		if hiX {
			hiKw = "exclusiveMaximum"
		}
		schema := fmt.Sprintf(`{"type":"number","%s":%s,"%s":%s}`, loKw, ratDecimal(lo), hiKw, ratDecimal(hi))
		text, err := FromJSONSchema([]byte(schema), Options{})
		if err == ErrUnsatisfiable && lo.Cmp(hi) == 0 && (loX || hiX) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		g := mustGrammar(t, text)
		var values []*big.Rat
		for k := -35000; k <= 35000; k += 1 + rng.Intn(60) {
			values = append(values, big.NewRat(int64(k), 10000))
		}
		step := big.NewRat(1, 10000)
		for _, b := range []*big.Rat{lo, hi} { // the bounds and their neighbours
			values = append(values, b, new(big.Rat).Add(b, step), new(big.Rat).Sub(b, step))
		}
		for k, v := range values {
			want := (v.Cmp(lo) > 0 || !loX && v.Cmp(lo) == 0) && (v.Cmp(hi) < 0 || !hiX && v.Cmp(hi) == 0)
			s := ratDecimal(v)
			if k%3 == 0 {
				s = v.FloatString(5) // trailing zeros: the same value
			}
			if got := g.Accepts(s); got != want {
				t.Fatalf("%s: %s accepted=%v, want %v\n%s", schema, s, got, want, text)
			}
		}
	}
}

func TestNumberUnboundedSyntax(t *testing.T) {
	g := schemaGrammar(t, `{"type":"number"}`, Options{})
	checkAccepts(t, g, []string{"0", "-0", "1.5", "-2e10", "3E+2", "1.0e-3"}, []string{"01", "1.", ".5", "+1", "1e", "NaN"})
	g = schemaGrammar(t, `{"type":"number","exclusiveMinimum":0}`, Options{})
	checkAccepts(t, g, []string{"0.001", "5", "1.0"}, []string{"0", "0.0", "-0.5", "-0", "1e3"})
	g = schemaGrammar(t, `{"type":"number","exclusiveMaximum":0}`, Options{})
	checkAccepts(t, g, []string{"-0.001", "-5"}, []string{"0", "-0", "-0.000", "0.5"})
}
