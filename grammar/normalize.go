package grammar

import (
	"encoding/json"
	"math/big"
	"strings"
)

// annotations are keywords that say nothing about which values are valid.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "default": true,
	"$schema": true, "$id": true, "$comment": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "$defs": true, "definitions": true,
}

// knownDialects are the $schema values whose keywords mean what this
// converter takes them to mean.
var knownDialects = map[string]bool{
	"https://json-schema.org/draft/2020-12/schema": true,
	"https://json-schema.org/draft/2019-09/schema": true,
	"http://json-schema.org/draft-07/schema":       true,
	"http://json-schema.org/draft-06/schema":       true,
}

// converter turns one schema document into a grammar.
type converter struct {
	root      any
	opts      Options
	refs      map[string]dnf // normalized $ref targets
	expanding map[string]bool
	e         *emitter
	work      *budget
}

// normalize reads the schema at path into alternatives of plain
// conjunctions, resolving allOf/anyOf/oneOf/nullable and $ref with siblings.
func (cv *converter) normalize(v any, path string) (dnf, error) {
	cv.work.spend(16 + len(path))
	switch s := v.(type) {
	case bool:
		if s {
			return trueDNF(path), nil
		}
		return dnf{}, nil
	case *object:
		return cv.normalizeObject(s, path)
	}
	return nil, invalid(path, "", "a schema must be an object or a boolean")
}

func (cv *converter) normalizeObject(s *object, path string) (dnf, error) {
	cv.work.spend(conjCost + 16*len(s.keys))
	own := newConj(path)
	for _, kw := range s.keys {
		val := s.vals[kw]
		if annotations[kw] {
			if kw == "$id" && path != "" {
				return nil, unsupported(path, kw, "a nested $id changes the base of $ref; only the root may carry one")
			}
			if d, _ := val.(string); kw == "$schema" && !knownDialects[strings.TrimSuffix(d, "#")] {
				return nil, unsupported(path, kw, "dialect %q is not a published JSON Schema draft: its vocabularies may change what keywords mean", d)
			}
			continue
		}
		if err := cv.ownKeyword(own, kw, val, path); err != nil {
			return nil, err
		}
	}
	out := dnf{own}
	if r, ok := s.get("$ref"); ok {
		ref, isStr := r.(string)
		if !isStr {
			return nil, invalid(path, "$ref", "not a string")
		}
		if own.isTrue() && !has(s, "allOf", "anyOf", "oneOf", "nullable") {
			own.ref = ref
			return out, nil
		}
		target, err := cv.expandRef(ref, path)
		if err != nil {
			return nil, err
		}
		if out, err = cv.merge(out, target, path); err != nil {
			return nil, err
		}
	}
	if v, ok := s.get("allOf"); ok {
		subs, err := cv.normalizeList(v, path, "allOf")
		if err != nil {
			return nil, err
		}
		for _, sub := range subs {
			if out, err = cv.merge(out, sub, path); err != nil {
				return nil, err
			}
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		v, ok := s.get(kw)
		if !ok {
			continue
		}
		subs, err := cv.normalizeList(v, path, kw)
		if err != nil {
			return nil, err
		}
		var union dnf
		var possible []dnf // false branches never match, so never count twice
		for _, sub := range subs {
			union = append(union, sub...)
			if len(sub) > 0 {
				possible = append(possible, sub)
			}
		}
		subs = possible
		if kw == "oneOf" {
			if err := cv.oneOfDisjoint(subs, path); err != nil {
				return nil, err
			}
		}
		if out, err = cv.merge(out, union, path); err != nil {
			return nil, err
		}
	}
	if v, ok := s.get("nullable"); ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, invalid(path, "nullable", "not a boolean")
		}
		if b {
			null := newConj(path)
			null.types = tNull
			out = append(out, null)
		}
	}
	return out, nil
}

func has(s *object, kws ...string) bool {
	for _, k := range kws {
		if _, ok := s.vals[k]; ok {
			return true
		}
	}
	return false
}

func (cv *converter) normalizeList(v any, path, kw string) ([]dnf, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, invalid(path, kw, "must be a non-empty array of schemas")
	}
	out := make([]dnf, len(list))
	for i, sub := range list {
		d, err := cv.normalize(sub, pointer(path, kw, itoa(i)))
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// oneOfDisjoint admits oneOf only where no value can match two branches, so
// it means the same as anyOf: branches of disjoint types, or literal sets
// (enum/const) with no value in common. "Exactly one" of overlapping
// branches is not a context-free property a grammar could state.
//
// Two alternatives of different branches are disjoint when their types
// are, or when both are enums with no common value (a $ref is never known
// disjoint). So, type by type: the alternatives that admit it, if they
// come from two branches or more, must all be enums, each value in one
// branch only. That is one pass over the alternatives and their values per
// type, where comparing every pair of branches was quadratic.
func (cv *converter) oneOfDisjoint(subs []dnf, path string) error {
	overlap := func(i, j int) error {
		return unsupported(path, "oneOf", "branches %d and %d may both match one value; only branches of disjoint types or disjoint enum/const values are supported", min(i, j), max(i, j))
	}
	for bit := typeMask(1); bit <= tFraction; bit <<= 1 {
		type alt struct {
			branch int
			c      *conj
		}
		var alts []alt
		for i, sub := range subs {
			for _, c := range sub {
				if c.ref != "" || c.types&bit != 0 {
					alts = append(alts, alt{i, c})
				}
			}
		}
		if len(alts) == 0 || alts[0].branch == alts[len(alts)-1].branch {
			continue // one branch admits this type, if any
		}
		for _, a := range alts {
			if !a.c.hasEnum || a.c.ref != "" {
				other := alts[0].branch
				if other == a.branch {
					other = alts[len(alts)-1].branch
				}
				return overlap(other, a.branch)
			}
		}
		owner := map[string]int{}
		for _, a := range alts {
			for _, v := range a.c.enum {
				k := cv.valueKey(v)
				if b, seen := owner[k]; seen && b != a.branch {
					return overlap(b, a.branch)
				}
				owner[k] = a.branch
			}
		}
	}
	return nil
}

// number reads a JSON number keyword exactly.
func number(v any, path, kw string) (*big.Rat, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, invalid(path, kw, "not a number")
	}
	r, ok := numberRat(n)
	if !ok {
		return nil, unsupported(path, kw, "%s is too large or too small to state exactly (at most %d digits)", n, maxNumberDigits)
	}
	return r, nil
}

// maxCount bounds length and item counts. A bounded repetition of n
// lowers to n copies of its element in llama.cpp's grammar: measured on
// the server, maxLength 100,000 took 1.7 s to compile and 1,000,000 took
// 24 s and 650 MB, for one request. Unbounded strings and arrays stay
// cheap (omit the keyword).
const maxCount = 10000

// count reads a non-negative integer keyword (2.0 counts as 2).
func count(v any, path, kw string) (int, error) {
	r, err := number(v, path, kw)
	if err != nil {
		return 0, err
	}
	if !r.IsInt() || r.Sign() < 0 {
		return 0, invalid(path, kw, "not a non-negative integer")
	}
	if !r.Num().IsInt64() || r.Num().Int64() > maxCount {
		return 0, unsupported(path, kw, "counts above %d are not supported", maxCount)
	}
	return int(r.Num().Int64()), nil
}
