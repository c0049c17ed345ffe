package chat

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// realUse is the most any real template uses of each bound.
type realUse struct {
	source, tag, blocks, brackets int
	operators                     int
	frames                        int
	steps, output, value, rng     int64
}

// TestRealTemplatesStayWithinBounds measures what the 70 real templates
// use of each bound, rendering the golden conversations and a long one
// (64 turns with tool calls and results), and holds every figure to a
// tenth of the default or less, so that the defaults leave them at least
// tenfold room. Run with -v for the figures the Limits doc quotes.
func TestRealTemplatesStayWithinBounds(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(templatesDir, "*.jinja"))
	if len(paths) == 0 {
		t.Skipf("no templates in %s (the shared test data is absent)", templatesDir)
	}
	spec := loadGoldenSpec(t)
	var reqs []Request
	names := make([]string, 0, len(spec.Conversations))
	for name := range spec.Conversations {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		reqs = append(reqs, spec.request(spec.Conversations[name]))
	}
	long := spec.request(spec.Conversations["tool2"])
	turns := long.Messages[1:]
	for len(long.Messages) < 64 {
		long.Messages = append(long.Messages, turns...)
	}
	reqs = append(reqs, long)

	var most realUse
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jinja")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		most.source = max(most.source, len(src))
		tag, blocks, brackets, operators := sourceUse(scanPieces(src))
		most.tag, most.blocks, most.brackets = max(most.tag, tag), max(most.blocks, blocks), max(most.brackets, brackets)
		most.operators = max(most.operators, operators)

		opts := spec.options(t, name)
		tmpl, err := Parse(src, opts)
		if err != nil {
			continue // refused as the reference refuses it (TestGoldens)
		}
		for _, r := range reqs {
			want, b, err := tmpl.execCounted(r)
			if err != nil {
				continue
			}
			most.steps, most.output = max(most.steps, b.steps), max(most.output, b.out)
			most.value, most.rng = max(most.value, b.peakValue), max(most.rng, b.peakRange)
			most.frames = max(most.frames, framesNeeded(t, src, opts, r, want))
		}
	}
	t.Logf("most any real template uses: source %d bytes, tag %d bytes, block nesting %d, bracket nesting %d, %d operators in a tag, recursion %d frames, %d steps, %d bytes of output, a value of %d bytes, a range of %d",
		most.source, most.tag, most.blocks, most.brackets, most.operators, most.frames, most.steps, most.output, most.value, most.rng)
	d := DefaultLimits
	for _, c := range []struct {
		name        string
		used, bound int64
	}{
		{BoundSourceBytes, int64(most.source), int64(d.SourceBytes)},
		{BoundTagBytes, int64(most.tag), int64(d.TagBytes)},
		{BoundNesting, int64(max(most.blocks, most.brackets)), int64(d.Nesting)},
		{BoundOperators, int64(most.operators), int64(d.Operators)},
		{BoundRecursion, int64(most.frames), int64(d.StackFrames)},
		{BoundSteps, most.steps, d.Steps},
		{BoundOutputBytes, most.output, d.OutputBytes},
		{BoundValueBytes, most.value, d.ValueBytes},
		{BoundRangeItems, most.rng, d.RangeItems},
	} {
		if c.used*10 > c.bound {
			t.Errorf("real templates use %d of the %s bound %d: less than tenfold room", c.used, c.name, c.bound)
		}
	}
}

// sourceUse measures the static figures of scanned source: the longest
// tag, the deepest block nesting, and the deepest bracket nesting and the
// most operators in a tag.
func sourceUse(pieces []piece) (tag, blocks, brackets, operators int) {
	depth := 0
	for _, p := range pieces {
		if p.kind == 't' {
			continue
		}
		tag = max(tag, len(p.inner))
		nest, ops := exprShape(p.inner)
		brackets, operators = max(brackets, nest), max(operators, ops)
		if p.kind != '%' {
			continue
		}
		switch kw := keyword(p.inner); {
		case opens[kw] || isBlockSet(p.inner):
			depth++
			blocks = max(blocks, depth)
		case closes[kw]:
			depth--
		}
	}
	return tag, blocks, brackets, operators
}

// framesNeeded finds, by bisection, the least StackFrames bound under
// which the template still renders r as want.
func framesNeeded(t *testing.T, src string, opts Options, r Request, want string) int {
	t.Helper()
	lo, hi := 1, DefaultLimits.StackFrames // lo fails or is untested, hi renders
	for lo < hi {
		mid := (lo + hi) / 2
		opts.Limits = Limits{StackFrames: mid}
		tmpl, err := Parse(src, opts)
		ok := err == nil
		if ok {
			got, err := tmpl.Exact(r)
			ok = err == nil && got == want
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}
