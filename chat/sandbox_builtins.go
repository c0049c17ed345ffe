package chat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// The engine builtins a template reaches through the sandbox's calls
// instead (see sandbox_calls.go): each gives the builtin's result, but
// works out the size of what it is about to build first, refusing beyond
// ValueBytes and charging the building to the step count.

// rangeCall is the engine's range (one to three integer arguments, a zero
// step refused) with its length checked before the list is made.
func (b *budget) rangeCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	start, step := int64(0), int64(1)
	var stop int64
	switch len(args) {
	case 1:
		stop = toInt(args[0])
	case 2, 3:
		start, stop = toInt(args[0]), toInt(args[1])
		if len(args) == 3 {
			step = toInt(args[2])
		}
	default:
		return jinja.Undefined(), fmt.Errorf("range: expected 1-3 arguments, got %d", len(args))
	}
	if step == 0 {
		return jinja.Undefined(), errors.New("range: step must not be zero")
	}
	n := rangeLen(start, stop, step)
	b.peakRange = max(b.peakRange, int64(min(n, 1<<62)))
	if n > uint64(b.lim.RangeItems) {
		return jinja.Undefined(), b.fail(BoundRangeItems, b.lim.RangeItems)
	}
	if err := b.step(int64(n)); err != nil {
		return jinja.Undefined(), err
	}
	items := make([]jinja.Value, n)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}

// rangeLen is the number of items range(start, stop, step) has, computed
// in unsigned arithmetic so that no distance between two int64s overflows.
func rangeLen(start, stop, step int64) uint64 {
	switch {
	case step > 0 && stop > start:
		return (uint64(stop)-uint64(start)-1)/uint64(step) + 1
	case step < 0 && stop < start:
		return (uint64(start)-uint64(stop)-1)/(-uint64(step)) + 1
	}
	return 0
}

// mulCall is the engine's * : a string times an integer repeats it (a
// negative count gives "", as in Python), a float on either side is a
// float product and anything else an integer one.
func (b *budget) mulCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 {
		return jinja.Undefined(), errors.New("*: expected two operands")
	}
	x, y := args[0], args[1]
	switch {
	case x.IsString() && y.IsInt():
		s, n := x.AsString(), max(y.AsInt(), 0)
		if s != "" && n > b.lim.ValueBytes/int64(len(s)) {
			return jinja.Undefined(), b.fail(BoundValueBytes, b.lim.ValueBytes)
		}
		if err := b.built(int64(len(s)) * n); err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(strings.Repeat(s, int(n))), nil
	case x.IsFloat() || y.IsFloat():
		return jinja.NewFloat(toFloat(x) * toFloat(y)), nil
	}
	return jinja.NewInt(toInt(x) * toInt(y)), nil
}

// addCall is the engine's + : with a string on either side both print and
// join, two lists concatenate, else a float or integer sum.
func (b *budget) addCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 {
		return jinja.Undefined(), errors.New("+: expected two operands")
	}
	x, y := args[0], args[1]
	switch {
	case x.IsString() || y.IsString():
		return b.concat(x, y)
	case x.IsList() && y.IsList():
		xs, ys := x.AsList().Items, y.AsList().Items
		if err := b.built(2 * int64(len(xs)+len(ys))); err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewList(append(append(make([]jinja.Value, 0, len(xs)+len(ys)), xs...), ys...)), nil
	case x.IsFloat() || y.IsFloat():
		return jinja.NewFloat(toFloat(x) + toFloat(y)), nil
	}
	return jinja.NewInt(toInt(x) + toInt(y)), nil
}

// catCall is the engine's ~ : both sides printed and joined.
func (b *budget) catCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 {
		return jinja.Undefined(), errors.New("~: expected two operands")
	}
	return b.concat(args[0], args[1])
}

// concat prints x and y (a list or dict measured first) and joins them.
func (b *budget) concat(x, y jinja.Value) (jinja.Value, error) {
	xs, err := b.printedChecked(x)
	if err != nil {
		return jinja.Undefined(), err
	}
	ys, err := b.printedChecked(y)
	if err != nil {
		return jinja.Undefined(), err
	}
	if err := b.built(int64(len(xs.AsString()) + len(ys.AsString()))); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(xs.AsString() + ys.AsString()), nil
}

// joinCall is the join filter: join(sep) or join(d=sep), attribute= to
// join one key of each dict; a value that is not a list prints as itself.
// The result's size is added up before it is built.
func (b *budget) joinCall(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	if !args[0].IsList() {
		return b.printedChecked(args[0])
	}
	sep := ""
	if len(args) > 1 {
		sep = printedScalar(args[1])
	}
	if d, ok := kwargs["d"]; ok {
		sep = printedScalar(d)
	}
	attr := ""
	if a, ok := kwargs["attribute"]; ok {
		attr = printedScalar(a)
	}
	items := args[0].AsList().Items
	parts := make([]string, len(items))
	var total int64
	for i, item := range items {
		if attr != "" && item.IsDict() {
			if v, ok := item.AsDict().Get(attr); ok {
				item = v
			}
		}
		part, err := b.printedChecked(item)
		if err != nil {
			return jinja.Undefined(), err
		}
		parts[i] = part.AsString()
		if total += int64(len(parts[i]) + len(sep)); total > b.lim.ValueBytes {
			return jinja.Undefined(), b.fail(BoundValueBytes, b.lim.ValueBytes)
		}
	}
	if err := b.built(total); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(strings.Join(parts, sep)), nil
}

// replaceCall is the replace filter, x|replace(old, new[, count]) (count=
// as a keyword too), and the string method x.replace(…) the rewrite turns
// into it. An empty old inserts new between every character, so the size
// is worked out first.
func (b *budget) replaceCall(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) < 3 {
		return jinja.NewString(""), errors.New("replace: expected at least 3 arguments")
	}
	s, old, repl := printedScalar(args[0]), printedScalar(args[1]), printedScalar(args[2])
	count := -1
	if len(args) > 3 {
		count = int(toInt(args[3]))
	}
	if c, ok := kwargs["count"]; ok {
		count = int(toInt(c))
	}
	n := strings.Count(s, old) // for old == "": runes + 1, as Replace inserts
	if count >= 0 {
		n = min(n, count)
	}
	if err := b.built(int64(len(s)) + int64(n)*int64(len(repl)-len(old))); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(strings.Replace(s, old, repl, count)), nil
}

// indentCall is the indent filter: indent(width=4, first=False), width
// and first positional or keyword; blank lines stay blank.
func (b *budget) indentCall(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	s := printedScalar(args[0])
	width := int64(4)
	if len(args) > 1 {
		width = toInt(args[1])
	}
	if w, ok := kwargs["width"]; ok {
		width = toInt(w)
	}
	first := len(args) > 2 && args[2].IsTruthy()
	if f, ok := kwargs["first"]; ok {
		first = f.IsTruthy()
	}
	if width < 0 {
		return jinja.Undefined(), errors.New("indent: negative width")
	}
	lines := strings.Split(s, "\n")
	if width > 0 && int64(len(lines)) > (b.lim.ValueBytes-int64(len(s)))/width {
		return jinja.Undefined(), b.fail(BoundValueBytes, b.lim.ValueBytes)
	}
	if err := b.built(int64(len(s)) + int64(len(lines))*width); err != nil {
		return jinja.Undefined(), err
	}
	pad := strings.Repeat(" ", int(width))
	for i, line := range lines {
		if line != "" && (i > 0 || first) {
			lines[i] = pad + line
		}
	}
	return jinja.NewString(strings.Join(lines, "\n")), nil
}

// formatCall is the engine's str.format: for each argument i, every "{i}"
// and then the first "{}" become its text. Each replacement's size is
// checked before it is made.
func (b *budget) formatCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), nil
	}
	out := printedScalar(args[0])
	for i, arg := range args[1:] {
		text := printedScalar(arg)
		hole := fmt.Sprintf("{%d}", i)
		grow := int64(strings.Count(out, hole))*int64(len(text)-len(hole)) + int64(len(text))
		if err := b.built(int64(len(out)) + grow); err != nil {
			return jinja.Undefined(), err
		}
		out = strings.ReplaceAll(out, hole, text)
		out = strings.Replace(out, "{}", text, 1)
	}
	return jinja.NewString(out), nil
}

// sliceCall is the engine's slice x[start:stop:step] of a list or a string
// (by characters), args[1] the mask of which parts were written. The
// engine's rules: a step of 0 is 1; unwritten start and stop run the whole
// way in the step's direction; a negative start or stop counts once from
// the end; then every index from start towards stop, stop excluded, that
// falls inside x is taken. Only those indices are visited here.
func (b *budget) sliceCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) < 2 || !args[1].IsString() {
		return jinja.Undefined(), errors.New("slice: malformed")
	}
	x, mask, parts := args[0], args[1].AsString(), args[2:]
	part := func(k int) (int64, bool) {
		if len(mask) <= k || mask[k] != '1' {
			return 0, false
		}
		n := strings.Count(mask[:k], "1")
		if n >= len(parts) {
			return 0, false
		}
		return toInt(parts[n]), true
	}
	var length int64
	var runes []rune
	switch {
	case x.IsList():
		length = int64(x.AsList().Len())
	case x.IsString():
		runes = []rune(x.AsString())
		length = int64(len(runes))
	default:
		return jinja.Undefined(), nil
	}
	step, ok := part(2)
	if !ok || step == 0 {
		step = 1
	}
	start, stop := int64(0), length
	if step < 0 {
		start, stop = length-1, -length-1
	}
	if v, ok := part(0); ok {
		if start = v; start < 0 {
			start += length
		}
	}
	if v, ok := part(1); ok {
		if stop = v; stop < 0 {
			stop += length
		}
	}
	idx := sliceIndices(start, stop, step, length)
	if err := b.step(int64(len(idx))); err != nil {
		return jinja.Undefined(), err
	}
	if x.IsList() {
		items := make([]jinja.Value, len(idx))
		for k, i := range idx {
			items[k] = x.AsList().Items[i]
		}
		return jinja.NewList(items), nil
	}
	out := make([]rune, len(idx))
	for k, i := range idx {
		out[k] = runes[i]
	}
	return jinja.NewString(string(out)), nil
}

// sliceIndices lists the indices start, start+step, … short of stop that
// lie in [0, length), without visiting the others: the first is found by
// arithmetic (in unsigned, so that no distance overflows) and the walk
// ends at the edge of x.
func sliceIndices(start, stop, step, length int64) []int64 {
	var idx []int64
	if step > 0 {
		i := start
		if start < 0 {
			d := uint64(0) - uint64(start)
			i = int64((uint64(step) - d%uint64(step)) % uint64(step))
		}
		for ; i < min(stop, length); i += step {
			idx = append(idx, i)
			if step > length-i {
				break
			}
		}
		return idx
	}
	astep := uint64(0) - uint64(step)
	i := start
	if start > length-1 {
		if length == 0 {
			return nil
		}
		d := uint64(start) - uint64(length-1)
		i = length - 1 - int64((astep-d%astep)%astep)
	}
	for ; i > max(stop, -1); i -= int64(astep) {
		idx = append(idx, i)
		if astep > uint64(i) {
			break
		}
	}
	return idx
}

// stringCall is the string filter: v's printed text, a list or dict
// measured before the engine expands it.
func (b *budget) stringCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	return b.printedChecked(args[0])
}

// tojsonCall is tojsonFilter on a value measured first: JSON is its
// printed form give or take punctuation and indentation, which is bounded
// per item (indent at most 64), so the measure bounds what is encoded.
func (b *budget) tojsonCall(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) > 0 {
		if err := b.checkValue(args[0]); err != nil {
			return jinja.Undefined(), err
		}
	}
	return tojsonFilter(args, kwargs)
}

// printedChecked is v's printed text, with a list or dict measured
// against ValueBytes before the engine expands it.
func (b *budget) printedChecked(v jinja.Value) (jinja.Value, error) {
	if v.IsList() || v.IsDict() {
		if err := b.checkValue(v); err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(v.String()), nil
	}
	return jinja.NewString(printedScalar(v)), nil
}

// printedScalar is how the engine prints v: none and undefined as "",
// booleans as Python's, floats with %g; a list or dict prints as the
// engine writes it, so callers measure those first.
func printedScalar(v jinja.Value) string {
	switch {
	case v.IsUndefined() || v.IsNone():
		return ""
	case v.IsBool():
		if v.AsBool() {
			return "True"
		}
		return "False"
	case v.IsInt():
		return fmt.Sprintf("%d", v.AsInt())
	case v.IsFloat():
		return fmt.Sprintf("%g", v.AsFloat())
	case v.IsString():
		return v.AsString()
	}
	return v.String()
}

// toInt and toFloat convert as the engine's arithmetic does: numbers and
// booleans by value, a string by its leading number, anything else 0.
func toInt(v jinja.Value) int64 {
	switch {
	case v.IsInt():
		return v.AsInt()
	case v.IsFloat():
		return int64(v.AsFloat())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
	case v.IsString():
		var n int64
		fmt.Sscanf(v.AsString(), "%d", &n)
		return n
	}
	return 0
}

func toFloat(v jinja.Value) float64 {
	switch {
	case v.IsFloat():
		return v.AsFloat()
	case v.IsInt():
		return float64(v.AsInt())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
	case v.IsString():
		var f float64
		fmt.Sscanf(v.AsString(), "%f", &f)
		return f
	}
	return 0
}
