package sched

import (
	"fmt"
	"strconv"
	"strings"
)

// Class is a request's quality of service. Lower is better: the scheduler
// admits, prefills and decodes better classes first, and preempts worse
// ones to make room for a Chat or FIM request.
type Class uint8

// The four classes, best first.
const (
	// Chat is a person reading a reply as it streams.
	Chat Class = iota
	// FIM is an editor waiting on an inline completion: short, watched,
	// and often superseded.
	FIM
	// Agent is a foreground agent: a person is waiting, but on a whole tool
	// loop rather than on each token.
	Agent
	// Background is batch work nobody is watching.
	Background

	// NumClasses is how many classes there are.
	NumClasses = 4
)

var classNames = [NumClasses]string{"chat", "fim", "agent", "background"}

func (c Class) String() string {
	if int(c) < NumClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// interactive reports whether a person watches this class token by token:
// such a request may preempt a worse lane, holds worse prefill back in the
// tick its prompt completes, and keeps ticks short while it is around.
func (c Class) interactive() bool { return c <= FIM }

// ParseClass reads a class name. It takes the names String gives, the
// seeds' names (interactive, completion, foreground, background-agent …)
// and the digits 0–3, in any case.
func ParseClass(s string) (Class, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "chat", "interactive", "interactive-chat", "interactive_chat", "0":
		return Chat, nil
	case "fim", "completion", "inline", "inline-completion", "inline_completion", "infill", "1":
		return FIM, nil
	case "agent", "foreground", "foreground-agent", "foreground_agent", "2":
		return Agent, nil
	case "background", "background-agent", "background_agent", "batch", "3":
		return Background, nil
	}
	return 0, fmt.Errorf("sched: unknown class %q (expected one of %s)", strings.TrimSpace(s), strings.Join(classNames[:], ", "))
}

// ClassLanes caps how many lanes each class may hold at once, indexed by
// Class; 0 leaves a class uncapped.
type ClassLanes [NumClasses]int

// String renders the caps the way ParseClassLanes reads them.
func (cl ClassLanes) String() string {
	var b strings.Builder
	for c, n := range cl {
		if n == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", Class(c), n)
	}
	return b.String()
}

// ParseClassLanes reads a cap spec such as "background=2,agent=6" (the
// --class-lanes flag). lanes is the scheduler's lane count: a cap above it
// could never bind and is refused, as are a cap of 0 (leave the class out
// instead), a class named twice, and anything that is not class=N.
func ParseClassLanes(spec string, lanes int) (ClassLanes, error) {
	var caps ClassLanes
	var seen [NumClasses]bool
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, num, ok := strings.Cut(part, "=")
		if !ok {
			return caps, fmt.Errorf("sched: class lanes: expected class=N, got %q", part)
		}
		c, err := ParseClass(name)
		if err != nil {
			return caps, fmt.Errorf("sched: class lanes: unknown class %q (expected one of %s)", strings.TrimSpace(name), strings.Join(classNames[:], ", "))
		}
		if seen[c] {
			return caps, fmt.Errorf("sched: class lanes: class %s is capped twice", c)
		}
		seen[c] = true
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if err != nil || n < 0 {
			return caps, fmt.Errorf("sched: class lanes: cap for %s must be a whole number, got %q", c, strings.TrimSpace(num))
		}
		if n == 0 {
			return caps, fmt.Errorf("sched: class lanes: cap for %s must be at least 1 (omit the class to leave it uncapped)", c)
		}
		if n > lanes {
			return caps, fmt.Errorf("sched: class lanes: cap %d for %s exceeds the %d lanes; it could never bind", n, c, lanes)
		}
		caps[c] = n
	}
	return caps, nil
}
