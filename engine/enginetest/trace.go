package enginetest

import (
	"fmt"
	"strings"

	"superfluid/engine"
)

func (e *Fake) tracePlan(p *engine.Plan) {
	w := e.Trace
	if e.TraceNow != nil {
		fmt.Fprintf(w, "tick %d @%v\n", e.ticks, e.TraceNow())
	} else {
		fmt.Fprintf(w, "tick %d\n", e.ticks)
	}
	for _, r := range p.Retires {
		fmt.Fprintf(w, "  retire L%d\n", r)
	}
	for _, a := range p.Admits {
		fmt.Fprintf(w, "  admit L%d seq=%d prompt=%d cached=%d max=%d\n", a.Lane, a.Seq, a.PromptLen, a.Cached, a.MaxTokens)
	}
	for _, f := range p.Prefills {
		fmt.Fprintf(w, "  prefill L%d [%d,+%d)\n", f.Lane, f.Offset, f.Count)
	}
	for _, d := range p.Decodes {
		fmt.Fprintf(w, "  decode L%d\n", d.Lane)
	}
}

func (e *Fake) traceEvents(ev *engine.Events, err error) {
	w := e.Trace
	counts := map[uint32]int{}
	var order []uint32
	var fin []string
	for _, t := range ev.Tokens {
		if counts[t.Lane] == 0 {
			order = append(order, t.Lane)
		}
		counts[t.Lane]++
		if t.Finish != engine.FinishNone {
			fin = append(fin, fmt.Sprintf("L%d:%s", t.Lane, t.Finish))
		}
	}
	var parts []string
	for _, l := range order {
		parts = append(parts, fmt.Sprintf("L%d×%d", l, counts[l]))
	}
	fmt.Fprintf(w, "  => tokens[%s]", strings.Join(parts, " "))
	if len(fin) > 0 {
		fmt.Fprintf(w, " finished[%s]", strings.Join(fin, " "))
	}
	if err != nil {
		fmt.Fprintf(w, " err=%q", err)
	}
	fmt.Fprintln(w)
}
