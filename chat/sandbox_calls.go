package chat

import "github.com/ardanlabs/jinja"

// The calls the source rewrite (sandbox_source.go) points a template at so
// that each render is counted against its budget. They are template
// variables made afresh for every render, bound to that render's budget;
// where one replaces an engine builtin (range, *, join, replace, indent,
// str.format) it gives the builtin's result, after checking its size
// before building it.
const (
	bodyCall         = "_sf_body"     // {% if _sf_body(text, vars…) %}{% endif %} opening a loop, macro or call body
	printCall        = "_sf_print"    // {{ (x)|_sf_print }}
	setCall          = "_sf_set"      // {% set a = (x)|_sf_set %}
	mulCall          = "_sf_mul"      // a * b
	addCall          = "_sf_add"      // a + b
	catCall          = "_sf_cat"      // a ~ b
	joinFilter       = "_sf_join"     // x|join
	replaceCall      = "_sf_replace"  // x|replace, x.replace(…)
	indentFilter     = "_sf_indent"   // x|indent
	formatCall       = "_sf_format"   // s.format(…)
	sliceCall        = "_sf_slice"    // x[a:b:c]
	stringFilter     = "_sf_string"   // x|string
	tojsonFilterName = "_sf_tojson"   // x|tojson (tojson.go), sized first
	rangeCall        = "range"        // shadows the engine's range
	iterCall         = iterableFilter // for x in (xs)|_sf_iterable
)

type callFn = func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error)

// budgetCalls returns the calls bound to b, by the names the rewritten
// template uses.
func budgetCalls(b *budget) map[string]jinja.Value {
	calls := map[string]callFn{
		bodyCall:         b.bodyCall,
		printCall:        b.printCall,
		setCall:          b.setCall,
		mulCall:          b.mulCall,
		addCall:          b.addCall,
		catCall:          b.catCall,
		joinFilter:       b.joinCall,
		replaceCall:      b.replaceCall,
		indentFilter:     b.indentCall,
		formatCall:       b.formatCall,
		sliceCall:        b.sliceCall,
		stringFilter:     b.stringCall,
		tojsonFilterName: b.tojsonCall,
		rangeCall:        b.rangeCall,
		iterCall:         b.iterCall,
	}
	vals := make(map[string]jinja.Value, len(calls))
	for name, fn := range calls {
		vals[name] = jinja.NewCallable(name, fn)
	}
	return vals
}

// bodyCall opens every run of a loop, macro or call-block body: args[0] is
// the body's literal text length, which the run may write, and the rest
// are the values the body was handed (loop variables, macro parameters),
// which must stay within the value bounds so that recursion cannot double
// a value at every level.
func (b *budget) bodyCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if err := b.depth(); err != nil {
		return jinja.Undefined(), err
	}
	if err := b.step(1); err != nil {
		return jinja.Undefined(), err
	}
	if len(args) > 0 && args[0].IsInt() {
		if err := b.output(args[0].AsInt()); err != nil {
			return jinja.Undefined(), err
		}
	}
	for _, v := range args[min(1, len(args)):] {
		if err := b.checkValue(v); err != nil {
			return jinja.Undefined(), err
		}
	}
	return jinja.Undefined(), nil
}

// printCall counts what {{ x }} writes, measured before the engine prints
// it (a nested value's printed form can be far larger than its memory).
func (b *budget) printCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), nil
	}
	v := args[0]
	if b.err != nil {
		return jinja.Undefined(), b.err
	}
	var size int64
	if !v.IsList() && !v.IsDict() {
		size = int64(len(printedScalar(v)))
	} else {
		var depth int64
		size, depth = valueSize(v, b.lim.OutputBytes-b.out, b.lim.ValueDepth)
		if depth > b.lim.ValueDepth {
			return jinja.Undefined(), b.fail(BoundValueDepth, b.lim.ValueDepth)
		}
	}
	if err := b.output(size); err != nil {
		return jinja.Undefined(), err
	}
	return v, nil
}

// setCall checks a value being stored: what is stored is what a loop can
// grow from one iteration to the next. For an attribute set, args[1] is
// the object set on, which the value must not contain: a value holding
// itself is infinitely deep, and the engine prints and compares values by
// recursion.
func (b *budget) setCall(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), nil
	}
	if err := b.checkValue(args[0]); err != nil {
		return jinja.Undefined(), err
	}
	if len(args) > 1 && args[1].IsDict() && contains(args[0], args[1].AsDict(), b.lim.ValueBytes) {
		return jinja.Undefined(), b.fail(BoundValueDepth, b.lim.ValueDepth)
	}
	return args[0], nil
}

// contains reports whether v holds the dict d anywhere, visiting at most
// budget lists and dicts (checkValue has bounded the value's size).
func contains(v jinja.Value, d *jinja.Dict, budget int64) bool {
	stack := []jinja.Value{v}
	for ; len(stack) > 0 && budget > 0; budget-- {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch {
		case v.IsList():
			stack = append(stack, v.AsList().Items...)
		case v.IsDict():
			if v.AsDict() == d {
				return true
			}
			for _, k := range v.AsDict().Keys {
				if e, ok := v.AsDict().Get(k); ok && (e.IsList() || e.IsDict()) {
					stack = append(stack, e)
				}
			}
		}
	}
	return false
}

// iterCall is the for loop's iterable check (iterable) plus a step for
// every item the loop is handed, charged before the loop starts.
func (b *budget) iterCall(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	v, err := iterable(args, kwargs)
	if err != nil {
		return v, err
	}
	var n int64
	switch {
	case v.IsList():
		n = int64(v.AsList().Len())
	case v.IsDict():
		n = int64(v.AsDict().Len())
	case v.IsString():
		n = int64(len(v.AsString()))
	}
	if err := b.step(n); err != nil {
		return jinja.Undefined(), err
	}
	return v, nil
}
