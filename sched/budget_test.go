package sched

import (
	"testing"
	"time"

	"superfluid/engine"
)

// budgetPlanner is a planner at the CPU's defaults (batch 2048,
// micro-batch 512) with lanes lanes and a learnt flat cost of 1 ms a
// prompt token, for reading stepPrefillBudget's decisions directly.
func budgetPlanner(lanes int, cfg Config) *planner {
	d := &engine.Descriptor{Lanes: lanes, Seqs: lanes, Batch: 2048, UBatch: 512, Ctx: 1 << 20}
	p := newPlanner(cfg.withDefaults(d), d, &counters{})
	p.prefillCost = rowCost{w: 1, a: 0.001}
	return p
}

// addLane puts an admitted lane of class c on p with prefilled of its
// promptLen prompt tokens in.
func addLane(p *planner, c Class, promptLen, prefilled int) *lane {
	p.nextTag++
	l := &lane{tag: p.nextTag, job: &job{class: c, prompt: make([]engine.Token, promptLen)}, admitted: true, prefilled: prefilled, npast: prefilled}
	p.lanes = append(p.lanes, l)
	return l
}

// Each step's prefill is sized by who could wait on it: half a second
// while a request could join or a Chat/FIM reply decodes, whole
// micro-batches within two seconds for a prompt alone, 0.15 s while a
// person worked on this engine within interactiveWindow, one micro-batch
// until the cost is known; a Chat/FIM prompt grows a step to the batch
// but beside a decoding Chat/FIM reply.
func TestStepPrefillBudgetBySomeoneWaiting(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		name              string
		setup             func(p *planner) []*lane // returns the decoders
		lanes             int
		cfg               Config
		budget, growLimit int
	}{
		{"alone: whole micro-batches within 2 s", func(p *planner) []*lane {
			addLane(p, Background, 10000, 0)
			return nil
		}, 4, Config{}, 1536, 2048},
		{"the cost unknown: one micro-batch", func(p *planner) []*lane {
			p.prefillCost = rowCost{}
			addLane(p, Background, 10000, 0)
			return nil
		}, 4, Config{}, 512, 2048},
		{"beside another lane with a lane free: half a second", func(p *planner) []*lane {
			addLane(p, Background, 10000, 0)
			addLane(p, Agent, 5000, 0)
			return nil
		}, 4, Config{}, 496, 2048},
		{"a queued request: half a second", func(p *planner) []*lane {
			addLane(p, Background, 10000, 0)
			p.queues[Agent] = append(p.queues[Agent], &job{class: Agent})
			return nil
		}, 4, Config{}, 496, 2048},
		{"beside a decoding Chat reply: half a second, for a Chat prompt too", func(p *planner) []*lane {
			addLane(p, Background, 10000, 0)
			chat := addLane(p, Chat, 10, 10)
			return []*lane{chat}
		}, 4, Config{}, 496, 496},
		{"a person at work here 5 s ago: 0.15 s", func(p *planner) []*lane {
			p.lastInteractive = now.Add(-5 * time.Second)
			addLane(p, Background, 10000, 0)
			return nil
		}, 4, Config{}, 144, 2048},
		{"a person at work here 11 s ago: alone again", func(p *planner) []*lane {
			p.lastInteractive = now.Add(-11 * time.Second)
			addLane(p, Background, 10000, 0)
			return nil
		}, 4, Config{}, 1536, 2048},
		{"one lane: nothing could join", func(p *planner) []*lane {
			addLane(p, Background, 10000, 0)
			return nil
		}, 1, Config{}, 1536, 2048},
		{"a fixed budget caps it", func(p *planner) []*lane {
			addLane(p, Background, 10000, 0)
			return nil
		}, 4, Config{PrefillBudget: 1024}, 1024, 2048},
		{"deep in a prompt alone: at least one micro-batch", func(p *planner) []*lane {
			p.prefillCost = rowCost{w: 1, a: 0.001, b: 1e-6}
			addLane(p, Background, 20000, 15000)
			return nil
		}, 4, Config{}, 512, 2048},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := budgetPlanner(c.lanes, c.cfg)
			decoders := c.setup(p)
			room := p.batch - len(decoders)
			budget, growMax := p.stepPrefillBudget(room, decoders, now)
			if budget != c.budget || min(growMax, room) != min(c.growLimit, room) {
				t.Errorf("budget %d, a Chat/FIM prompt grows to %d; want %d, %d", budget, min(growMax, room), c.budget, min(c.growLimit, room))
			}
		})
	}
}
