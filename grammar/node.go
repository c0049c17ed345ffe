package grammar

import "math/big"

// typeMask is a set of JSON types; integers and non-integral numbers are
// separate bits so "number" ∧ "integer" is plain bit intersection.
type typeMask uint8

const (
	tNull typeMask = 1 << iota
	tBool
	tObject
	tArray
	tString
	tInteger
	tFraction // numbers that are not integers
	tNumber   = tInteger | tFraction
	tAll      = tNull | tBool | tObject | tArray | tString | tNumber
)

var typeNames = map[string]typeMask{
	"null": tNull, "boolean": tBool, "object": tObject, "array": tArray,
	"string": tString, "integer": tInteger, "number": tNumber,
}

// conj is one schema with its combinators resolved away: a conjunction of
// per-type constraints, each applying only to values of its type (as JSON
// Schema's keywords do). A conj with ref set is a reference left unexpanded
// so recursive schemas stay finite; it carries nothing else.
type conj struct {
	path  string
	ref   string
	types typeMask

	enum    []any
	hasEnum bool

	lo, hi         *big.Rat
	loExcl, hiExcl bool

	minLen, maxLen int // maxLen < 0: none
	pattern        string
	hasPattern     bool
	format         string

	props      []prop
	propIndex  map[string]int // props by name (propSchema)
	required   []string
	additional *dnf // nil: any value

	prefix             []dnf
	items              *dnf // nil: any value
	minItems, maxItems int  // maxItems < 0: none
}

type prop struct {
	name   string
	schema dnf
}

// dnf is a schema as alternatives of conj; none at all is the false schema.
type dnf []*conj

func newConj(path string) *conj {
	return &conj{path: path, types: tAll, maxLen: -1, maxItems: -1}
}

func trueDNF(path string) dnf { return dnf{newConj(path)} }

// isTrue reports a conj that constrains nothing: any JSON value.
func (c *conj) isTrue() bool {
	return c.ref == "" && c.types == tAll && !c.hasEnum && !c.numberBounded() &&
		!c.stringConstrained() && !c.objectConstrained() && !c.arrayConstrained()
}

func (c *conj) numberBounded() bool { return c.lo != nil || c.hi != nil }

func (c *conj) stringConstrained() bool {
	return c.minLen > 0 || c.maxLen >= 0 || c.hasPattern || c.format != ""
}

func (c *conj) objectConstrained() bool {
	return len(c.props) > 0 || len(c.required) > 0 || c.additional != nil
}

func (c *conj) arrayConstrained() bool {
	return len(c.prefix) > 0 || c.items != nil || c.minItems > 0 || c.maxItems >= 0
}

// propSchema looks a declared property up: past a few, through an index
// of props brought up to date on each call (props only grow, and names
// are unique), since merging two objects looks up each property of one in
// the other, which a scan made quadratic.
func (c *conj) propSchema(name string) (dnf, bool) {
	if len(c.props) <= 8 {
		for _, p := range c.props {
			if p.name == name {
				return p.schema, true
			}
		}
		return nil, false
	}
	if c.propIndex == nil {
		c.propIndex = make(map[string]int, len(c.props))
	}
	for i := len(c.propIndex); i < len(c.props); i++ {
		c.propIndex[c.props[i].name] = i
	}
	if i, ok := c.propIndex[name]; ok {
		return c.props[i].schema, true
	}
	return nil, false
}

// itemAt is the schema of array element i.
func (c *conj) itemAt(i int) *dnf {
	if i < len(c.prefix) {
		return &c.prefix[i]
	}
	return c.items
}

func (d dnf) isTrue() bool {
	for _, c := range d {
		if c.isTrue() {
			return true
		}
	}
	return false
}
