package chat

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/ardanlabs/jinja"
)

// Limits bound what one chat template may cost. A template is model
// metadata anyone can publish (a pulled GGUF, a --chat-template-file), so
// it is treated as hostile: Parse refuses source beyond the static bounds,
// and every render counts what it does against the dynamic ones and stops
// with a *BoundError at the first it crosses. A zero field takes its
// default (DefaultLimits).
//
// The defaults sit far above what the 70 real templates in
// ../shared/templates use, rendering the golden conversations and a
// 64-turn one with tool calls (TestRealTemplatesStayWithinBounds measures
// it, holds each figure to a tenth of its bound and prints them with -v):
// at most 16.3 KiB of source, a 5.6 KiB tag, blocks nested 10 deep and
// brackets 4, 126 operators and brackets in a tag, recursion of 124
// frames, 5,909 steps, 678 KiB of output, a 6.6 KiB value and a range of
// 65.
type Limits struct {
	// SourceBytes bounds the template text; TagBytes one {{ }} or {% %}
	// tag in it; Nesting the depth of nested blocks (if, for, macro, …)
	// and of brackets inside one tag. Together they bound the engine's
	// recursive parse and its recursion over an expression.
	SourceBytes, TagBytes, Nesting int
	// Operators bounds the operators, brackets and subscripts in one tag:
	// the rewrite nests each * + ~ and slice as a call, so this bounds how
	// deeply the rewritten expression nests.
	Operators int
	// StackFrames bounds recursion while rendering (macro calls, call
	// blocks, recursive loops), measured where it costs: the Go stack
	// frames under a macro or loop body when it starts.
	StackFrames int
	// Steps bounds the work of one render: each loop iteration, each item
	// a loop is handed and each macro or call-block entry is a step.
	Steps int64
	// OutputBytes bounds the text a render writes: what {{ }} prints plus
	// the literal text of every loop and macro body run.
	OutputBytes int64
	// ValueBytes bounds one value a template builds: a string made by
	// repetition, join, replace, format or indent, and a value stored with
	// set or handed to a macro or a loop (nested values count every item
	// and every byte, shared parts once per use).
	ValueBytes int64
	// ValueDepth bounds how deeply a value built by the template nests
	// (the engine prints and compares values recursively). It is above
	// encoding/json's own nesting limit, so request data never reaches it.
	ValueDepth int64
	// RangeItems bounds range()'s length, checked before the list exists.
	RangeItems int64
	// Time bounds a render's wall-clock time, checked at every step: a
	// backstop behind Steps for work a step does not see.
	Time time.Duration
}

// DefaultLimits are the bounds every template gets unless Options.Limits
// says otherwise; see Limits for how they compare with real templates.
var DefaultLimits = Limits{
	SourceBytes: 1 << 20,
	TagBytes:    64 << 10,
	Nesting:     128,
	Operators:   2048,
	StackFrames: 4000,
	Steps:       4_000_000,
	OutputBytes: 32 << 20,
	ValueBytes:  32 << 20,
	ValueDepth:  20_000,
	RangeItems:  1_000_000,
	Time:        10 * time.Second,
}

// withDefaults fills l's zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	pick64 := func(v *int64, dv int64) {
		if *v <= 0 {
			*v = dv
		}
	}
	pick(&l.SourceBytes, d.SourceBytes)
	pick(&l.TagBytes, d.TagBytes)
	pick(&l.Nesting, d.Nesting)
	pick(&l.Operators, d.Operators)
	pick(&l.StackFrames, d.StackFrames)
	pick64(&l.Steps, d.Steps)
	pick64(&l.OutputBytes, d.OutputBytes)
	pick64(&l.ValueBytes, d.ValueBytes)
	pick64(&l.ValueDepth, d.ValueDepth)
	pick64(&l.RangeItems, d.RangeItems)
	if l.Time <= 0 {
		l.Time = d.Time
	}
	return l
}

// Names of the bounds, as a BoundError carries them.
const (
	BoundSourceBytes = "source size"
	BoundTagBytes    = "tag size"
	BoundNesting     = "nesting depth"
	BoundOperators   = "operators per tag"
	BoundRecursion   = "recursion depth"
	BoundSteps       = "step count"
	BoundOutputBytes = "output size"
	BoundValueBytes  = "value size"
	BoundValueDepth  = "value depth"
	BoundRangeItems  = "range length"
	BoundTime        = "render time"
	BoundSandbox     = "sandbox"
)

// ErrBound is matched (errors.Is) by every *BoundError.
var ErrBound = errors.New("chat template exceeds a bound")

// BoundError is a template crossing one of its Limits, while parsing or
// rendering. Bound is one of the Bound constants and Limit its value (in
// the bound's unit: bytes, levels, frames, steps, items, milliseconds).
//
// A template the sandbox cannot instrument (it uses a name the rewrite
// reserves, or takes a method it must size without calling it) is refused
// the same way, with Bound BoundSandbox and Detail saying what it did.
type BoundError struct {
	Bound  string
	Limit  int64
	Detail string
}

func (e *BoundError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("chat template refused by its %s: %s", e.Bound, e.Detail)
	}
	return fmt.Sprintf("chat template exceeds its %s bound (%d)", e.Bound, e.Limit)
}

// Is makes errors.Is(err, ErrBound) true for every BoundError.
func (e *BoundError) Is(target error) bool { return target == ErrBound }

// budget is one render's account against the limits. The template calls
// into it through the hooks the source rewrite inserts (see sandbox.go);
// the first bound crossed is kept in err, since the engine may wrap or
// reword a callable's error, and exec returns it as it is.
type budget struct {
	lim      *Limits
	steps    int64
	out      int64
	deadline time.Time
	err      error
	// peakValue and peakRange are the largest value checked and the
	// longest range made, which tests compare with real templates' use.
	peakValue, peakRange int64
}

func newBudget(lim *Limits) *budget {
	return &budget{lim: lim, deadline: time.Now().Add(lim.Time)}
}

// fail records the first bound crossed and returns it.
func (b *budget) fail(bound string, limit int64) error {
	if b.err == nil {
		b.err = &BoundError{Bound: bound, Limit: limit}
	}
	return b.err
}

// step charges n steps and checks the clock.
func (b *budget) step(n int64) error {
	if b.err != nil {
		return b.err
	}
	b.steps += n
	if b.steps > b.lim.Steps {
		return b.fail(BoundSteps, b.lim.Steps)
	}
	if time.Now().After(b.deadline) {
		return b.fail(BoundTime, b.lim.Time.Milliseconds())
	}
	return nil
}

// output charges n bytes of written text.
func (b *budget) output(n int64) error {
	if b.err != nil {
		return b.err
	}
	b.out += n
	if b.out > b.lim.OutputBytes {
		return b.fail(BoundOutputBytes, b.lim.OutputBytes)
	}
	return nil
}

// value refuses a value whose size exceeds ValueBytes.
func (b *budget) value(size int64) error {
	b.peakValue = max(b.peakValue, size)
	if size > b.lim.ValueBytes {
		return b.fail(BoundValueBytes, b.lim.ValueBytes)
	}
	return nil
}

// checkValue refuses a value larger than ValueBytes or nested deeper than
// ValueDepth; see valueSize.
func (b *budget) checkValue(v jinja.Value) error {
	if b.err != nil {
		return b.err
	}
	size, depth := valueSize(v, b.lim.ValueBytes, b.lim.ValueDepth)
	if depth > b.lim.ValueDepth {
		return b.fail(BoundValueDepth, b.lim.ValueDepth)
	}
	return b.value(size)
}

// valueSize measures v as printed, roughly: the bytes of its strings, 8
// for any other scalar and 2 for each item and bracket. Parts shared
// within v count once per use, as printing repeats them, and the walk
// stops as soon as the size passes maxSize or the depth maxDepth, so a
// value whose printed form is exponential in its memory costs no more
// than the bound to refuse. It walks with its own stack: data may be
// nested deeper than recursion should go.
func valueSize(v jinja.Value, maxSize, maxDepth int64) (size, depth int64) {
	type item struct {
		v     jinja.Value
		depth int64
	}
	stack := []item{{v, 1}}
	for len(stack) > 0 && size <= maxSize && depth <= maxDepth {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		depth = max(depth, it.depth)
		switch {
		case it.v.IsString():
			size += int64(len(it.v.AsString()))
		case it.v.IsList():
			items := it.v.AsList().Items
			size += 2 + 2*int64(len(items))
			if size > maxSize {
				break
			}
			for i := len(items) - 1; i >= 0; i-- {
				stack = append(stack, item{items[i], it.depth + 1})
			}
		case it.v.IsDict():
			d := it.v.AsDict()
			size += 2
			for _, k := range d.Keys {
				if size += 4 + int64(len(k)); size > maxSize {
					break
				}
				if e, ok := d.Get(k); ok {
					stack = append(stack, item{e, it.depth + 1})
				}
			}
		default:
			size += 8
		}
	}
	return size, depth
}

// builtBytesPerStep is how many bytes an operation may build for one step:
// a step stands for a loop iteration's worth of work, and copying 4 KiB
// costs about that.
const builtBytesPerStep = 4 << 10

// built refuses a value of size bytes about to be built beyond
// ValueBytes, and charges its building to the step count, so that many
// large values built in a row meet the Steps bound.
func (b *budget) built(size int64) error {
	if err := b.value(size); err != nil {
		return err
	}
	return b.step(size / builtBytesPerStep)
}

// depth refuses a stack deeper than StackFrames. runtime.Callers with a
// skip of StackFrames fills its one slot only when there are more frames
// than that; it walks at most StackFrames frames to find out, so the cost
// is that of the recursion being checked.
func (b *budget) depth() error {
	if b.err != nil {
		return b.err
	}
	var pc [1]uintptr
	if runtime.Callers(b.lim.StackFrames, pc[:]) > 0 {
		return b.fail(BoundRecursion, int64(b.lim.StackFrames))
	}
	return nil
}
