package chat

import (
	"fmt"

	"github.com/ardanlabs/jinja"
)

// The filters the source rewrites insert (see source.go), so that the
// engine refuses what transformers' jinja2 sandbox refuses.

// unsafeMethod is `x|_sf_unsafe('append', …)`: a mutating method call,
// refused with the sandbox's own words.
func unsafeMethod(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	name := "method"
	if len(args) > 1 && args[1].IsString() {
		name = args[1].AsString()
	}
	return jinja.Undefined(), fmt.Errorf("access to attribute '%s' of '%s' object is unsafe", name, pythonType(args[0]))
}

// iterable is `(x)|_sf_iterable` around a for loop's iterable: none, a
// number or a boolean cannot be iterated in Python.
func iterable(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), nil
	}
	v := args[0]
	if v.IsNone() || v.IsNumber() || v.IsBool() || v.IsCallable() {
		return jinja.Undefined(), fmt.Errorf("'%s' object is not iterable", pythonType(v))
	}
	return v, nil
}

// pythonType names v's type as Python's messages do.
func pythonType(v jinja.Value) string {
	switch {
	case v.IsNone():
		return "NoneType"
	case v.IsBool():
		return "bool"
	case v.IsInt():
		return "int"
	case v.IsFloat():
		return "float"
	case v.IsString():
		return "str"
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	case v.IsCallable():
		return "function"
	}
	return "Undefined"
}
