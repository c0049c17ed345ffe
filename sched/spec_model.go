package sched

import "superfluid/engine"

// Drafts from a model: a draft model (SpecDraftSimple) or the model's
// own multi-token prediction layers (SpecDraftMTP). The planner decides, lane
// by lane, which lanes draft and how many tokens each may take (addDecode);
// the drafter then drafts for all of them in one call — one draft-model
// decode per draft position for every drafting lane, not one per lane —
// and finishDrafts puts the drafts into the plan. The drafter's time is
// part of what the drafted step cost: the gates count it (learnSpec).

// modelDrafts is one step's requests to the drafter.
type modelDrafts struct {
	reqs   []engine.DraftRequest
	asks   []modelAsk
	secs   float64 // the drafter's time for the step being learnt
	failed bool    // the last call failed (logged once until one succeeds)
}

// modelAsk is a request's lane, its decode's index in the plan, and
// whether its draft is padded for synthetic acceptance.
type modelAsk struct {
	lane   *lane
	decode int
	synth  bool
}

func (m *modelDrafts) ask(l *lane, decode, k int, synth bool) {
	m.reqs = append(m.reqs, engine.DraftRequest{Lane: l.tag, History: l.tokens, Max: k})
	m.asks = append(m.asks, modelAsk{lane: l, decode: decode, synth: synth})
}

// finishDrafts asks the drafter for the drafts addDecode asked for and
// gives each lane its own (none when the drafter fails: the step runs
// plain).
func (p *planner) finishDrafts(pl *engine.Plan) {
	s := &p.spec
	m := &s.model
	m.secs = 0
	if len(m.reqs) == 0 {
		return
	}
	defer func() {
		clear(m.reqs) // drop the histories
		m.reqs, m.asks = m.reqs[:0], m.asks[:0]
	}()
	took, err := s.cfg.Drafter.Draft(m.reqs)
	m.secs = took.Seconds()
	if err != nil {
		if !m.failed {
			p.cfg.Logger.Error("sched: the draft model failed; this step runs without drafts", "err", err)
		}
		m.failed = true
		return
	}
	m.failed = false
	for i, a := range m.asks {
		s.room += m.reqs[i].Max // the hold addDecode took
		s.buf = append(s.buf[:0], m.reqs[i].Draft...)
		p.addDraft(pl, a.decode, a.lane, m.reqs[i].Max, a.synth)
	}
}

// draftSecs is the drafter's time in the step being learnt; 0 for other
// draft sources.
func (s *specState) draftSecs() float64 { return s.model.secs }
