package reply

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Options tune a Parser to one request.
type Options struct {
	// InReasoning says the prompt ends inside an open reasoning block (the
	// generation prompt wrote the opening marker), so the reply starts as
	// reasoning.
	InReasoning bool
	// Lead is text the prompt ended with that the reply continues: the
	// start of a call marker the generation prompt wrote (Functionary
	// v3.2's ">>>"); Format.PromptLead finds it. It is read before the
	// reply.
	Lead string
	// Tools are the names of the tools the request declared. A call to
	// another name is content. Nil accepts any name.
	Tools []string
	// Warn, when set, hears why a call block was returned as content.
	Warn func(msg string)
	// Schemas are the declared tools' parameters schemas by name (nil
	// for any object), for syntaxes that write arguments as markup and
	// read a value back as a string or as JSON by its declared type.
	Schemas map[string]json.RawMessage
}

// maxBlockBytes bounds a call block held waiting for its end: a model
// that opens a call and never closes it would otherwise hold the whole
// reply back from a streaming client.
const maxBlockBytes = 1 << 20

type parseMode uint8

const (
	inContent parseMode = iota
	inReasoning
	inCall
)

// Parser turns generated text into Events as it streams. One Parser reads
// one reply; it is not safe for concurrent use.
type Parser struct {
	f    Format
	opts Options
	mode parseMode
	// buf is text received and not yet released.
	buf string
	// begun: the reply has released something other than whitespace, so
	// openers that only count at the start no longer do.
	begun bool
	// trimLead drops whitespace at the start of the next content or
	// reasoning: what models put after a marker.
	trimLead bool
	calls    int
	out      []Event
}

// NewParser returns a parser of one reply in format f.
func (f Format) NewParser(opts Options) *Parser {
	p := &Parser{f: f, opts: opts, buf: opts.Lead}
	if opts.InReasoning && f.think != nil {
		p.mode, p.trimLead = inReasoning, true
	}
	return p
}

// Feed reads the next piece of generated text and returns the events it
// completes. The returned slice is valid until the next call.
func (p *Parser) Feed(text string) []Event {
	p.out = p.out[:0]
	p.buf += text
	p.run(false)
	return p.out
}

// Finish ends the reply: what is held back is released, an unclosed call
// block parsed if its syntax accepts it so and returned as content if not.
func (p *Parser) Finish() []Event {
	p.out = p.out[:0]
	p.run(true)
	return p.out
}

// Calls is the number of calls parsed so far.
func (p *Parser) Calls() int { return p.calls }

func (p *Parser) run(final bool) {
	for {
		var progressed bool
		switch p.mode {
		case inContent:
			progressed = p.content(final)
		case inReasoning:
			progressed = p.reasoning(final)
		case inCall:
			progressed = p.call(final)
		}
		if !progressed {
			return
		}
	}
}

// marker is a text with meaning found in content.
type marker struct {
	at   int
	text string
	kind parseMode // inReasoning: opens reasoning; inCall: opens a call; inContent: dropped
}

// content releases content up to the next marker, or up to what could
// still become one. It reports whether it changed mode or consumed a
// marker, so the loop should go on.
func (p *Parser) content(final bool) bool {
	mk, ok := p.nextMarker()
	if !ok {
		safe := len(p.buf)
		if !final {
			safe -= p.heldPrefix()
			if p.f.calls != nil {
				// Whitespace before a call is not content; wait to see
				// what follows it.
				safe = len(strings.TrimRight(p.buf[:safe], " \t\r\n"))
			}
		} else if p.calls > 0 {
			p.buf = strings.TrimRight(p.buf, " \t\r\n")
			safe = len(p.buf)
		}
		p.emitContent(p.buf[:safe])
		p.buf = p.buf[safe:]
		return false
	}
	before := p.buf[:mk.at]
	if !final && p.longerMayFollow(mk) {
		// ">>>" opens a call, but ">>>all\n" is dropped: wait to see
		// which one this is.
		keep := len(strings.TrimRight(before, " \t\r\n"))
		p.emitContent(p.buf[:keep])
		p.buf = p.buf[keep:]
		return false
	}
	if mk.kind != inContent {
		before = strings.TrimRight(before, " \t\r\n")
	}
	p.emitContent(before)
	switch mk.kind {
	case inContent:
		p.buf = p.buf[mk.at+len(mk.text):]
		if p.f.think != nil && mk.text == p.f.think.close {
			p.trimLead = true
		}
	case inReasoning:
		p.buf = p.buf[mk.at+len(mk.text):]
		p.mode, p.trimLead = inReasoning, true
	case inCall:
		p.buf = p.buf[mk.at:]
		p.mode = inCall
	}
	return true
}

// nextMarker finds the earliest marker in buf (the longest at a tie).
func (p *Parser) nextMarker() (marker, bool) {
	best := marker{at: -1}
	try := func(text string, kind parseMode, atStart bool) {
		if text == "" {
			return
		}
		i := strings.Index(p.buf, text)
		if i < 0 || atStart && (p.begun || strings.TrimLeft(p.buf[:i], " \t\r\n") != "") {
			return
		}
		if best.at < 0 || i < best.at || i == best.at && len(text) > len(best.text) {
			best = marker{at: i, text: text, kind: kind}
		}
	}
	if p.f.think != nil {
		// A reasoning block comes before the answer, never inside it.
		try(p.f.think.open, inReasoning, true)
		// A reply that closes a block it never opened (the prompt opened
		// it, or the model skipped straight to the end) has reasoned
		// nothing: the marker is dropped, not shown as content.
		try(p.f.think.close, inContent, true)
	}
	if p.f.calls != nil {
		for _, o := range p.f.calls.openers() {
			try(o.text, inCall, o.atStart)
		}
	}
	for _, d := range p.f.drops {
		try(d, inContent, false)
	}
	return best, best.at >= 0
}

// longerMayFollow reports whether the text from mk on is the start of a
// longer marker, which the next text may complete.
func (p *Parser) longerMayFollow(mk marker) bool {
	rest := p.buf[mk.at:]
	var texts []string
	if p.f.calls != nil {
		texts = p.f.CallOpeners()
	}
	texts = append(texts, p.f.drops...)
	for _, m := range texts {
		if len(m) > len(rest) && len(m) > len(mk.text) && strings.HasPrefix(m, rest) {
			return true
		}
	}
	return false
}

// heldPrefix is the length of the longest suffix of buf that is a proper
// prefix of a marker that could still open there.
func (p *Parser) heldPrefix() int {
	n := 0
	hold := func(text string, atStart bool) {
		if atStart && p.begun {
			return
		}
		for k := min(len(text)-1, len(p.buf)); k > n; k-- {
			if strings.HasSuffix(p.buf, text[:k]) {
				if atStart && strings.TrimLeft(p.buf[:len(p.buf)-k], " \t\r\n") != "" {
					return
				}
				n = k
				return
			}
		}
	}
	if p.f.think != nil {
		hold(p.f.think.open, true)
		hold(p.f.think.close, true)
	}
	if p.f.calls != nil {
		for _, o := range p.f.calls.openers() {
			hold(o.text, o.atStart)
		}
	}
	for _, d := range p.f.drops {
		hold(d, false)
	}
	return n
}

func (p *Parser) reasoning(final bool) bool {
	if p.trimLead {
		p.buf = strings.TrimLeft(p.buf, " \t\r\n")
		if p.buf == "" && !final {
			return false
		}
		p.trimLead = false
	}
	if i := strings.Index(p.buf, p.f.think.close); i >= 0 {
		p.emit(Reasoning, strings.TrimRight(p.buf[:i], " \t\r\n"))
		p.buf = p.buf[i+len(p.f.think.close):]
		p.mode, p.trimLead = inContent, true
		return true
	}
	safe := len(p.buf)
	if !final {
		for k := min(len(p.f.think.close)-1, len(p.buf)); k > 0; k-- {
			if strings.HasSuffix(p.buf, p.f.think.close[:k]) {
				safe -= k
				break
			}
		}
		safe = len(strings.TrimRight(p.buf[:safe], " \t\r\n"))
	}
	p.emit(Reasoning, p.buf[:safe])
	p.buf = p.buf[safe:]
	return false
}

func (p *Parser) call(final bool) bool {
	n := p.f.calls.blockEnd(p.buf, final)
	if n < 0 && !final && len(p.buf) <= maxBlockBytes {
		return false
	}
	if n < 0 {
		p.warn("a call block never closed (%d bytes); returned as content", len(p.buf))
		p.release(len(p.buf))
		return false
	}
	block := p.buf[:n]
	calls, err := p.parseBlock(block)
	if err == nil {
		err = p.checkNames(calls)
	}
	if err != nil {
		p.warn("a call block does not parse (%v); returned as content", err)
		p.release(n)
		return true
	}
	for _, c := range calls {
		p.emit(Call, "")
		p.out[len(p.out)-1].Call = c
		p.calls++
	}
	p.buf = p.buf[n:]
	p.mode, p.trimLead, p.begun = inContent, true, true
	return true
}

// release returns the first n bytes of buf as content and goes back to
// reading content: what looked like a call was not one.
func (p *Parser) release(n int) {
	p.emit(Content, p.buf[:n])
	p.begun = true
	p.buf = p.buf[n:]
	p.mode = inContent
}

func (p *Parser) checkNames(calls []ToolCall) error {
	if p.opts.Tools == nil {
		return nil
	}
	for _, c := range calls {
		known := false
		for _, t := range p.opts.Tools {
			known = known || t == c.Name
		}
		if !known {
			return fmt.Errorf("the call names %q, which the request does not declare", c.Name)
		}
	}
	return nil
}

func (p *Parser) emitContent(s string) {
	if p.trimLead {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		p.trimLead = false
	}
	if strings.TrimLeft(s, " \t\r\n") != "" {
		p.begun = true
	}
	p.emit(Content, s)
}

// emit appends an event, merging it into the last one of the same kind.
func (p *Parser) emit(k Kind, s string) {
	if s == "" && k != Call {
		return
	}
	if n := len(p.out); n > 0 && k != Call && p.out[n-1].Kind == k {
		p.out[n-1].Text += s
		return
	}
	p.out = append(p.out, Event{Kind: k, Text: s})
}

func (p *Parser) warn(format string, args ...any) {
	if p.opts.Warn != nil {
		p.opts.Warn(fmt.Sprintf(format, args...))
	}
}
