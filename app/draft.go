package app

import (
	"fmt"
	"log/slog"

	"superfluid/cgo"
	"superfluid/sched"
)

// openDrafter opens the draft model of --spec-draft-model for eng's lanes,
// when the speculation asks for one and eng's model can take drafts: an
// engine of its own, a sequence per lane, eng's context and threads.
// nil, nil when there is nothing to open.
func openDrafter(o Options, eng *cgo.Engine) (*cgo.Drafter, error) {
	spec := o.Sched.Speculation
	if spec.Type != sched.SpecDraftSimple {
		return nil, nil
	}
	desc := eng.Descriptor()
	if !desc.Drafts {
		slog.Warn("speculation off: this model's sequences cannot be cut back after a draft", "architecture", desc.Architecture)
		return nil, nil
	}
	d, err := cgo.Open(cgo.Options{ModelPath: spec.DraftModel, Ctx: desc.Ctx, Lanes: desc.Lanes, Seqs: desc.Lanes,
		Batch: cgo.DefaultUBatch, Threads: o.Threads, FlashAttn: o.FlashAttn, Poll: o.Poll})
	if err != nil {
		return nil, fmt.Errorf("--spec-draft-model %s: %w", spec.DraftModel, err)
	}
	dr, err := cgo.NewDrafter(d, eng, float32(spec.DraftPMin))
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("--spec-draft-model %s: %w", spec.DraftModel, err)
	}
	return dr, nil
}
