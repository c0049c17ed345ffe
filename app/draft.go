package app

import (
	"fmt"
	"log/slog"

	"superfluid/cgo"
	"superfluid/sched"
)

// openDrafter gives o's speculation its drafter when it asks for a draft
// model (--spec-type draft-simple): the model of --spec-draft-model opened
// for eng's lanes — an engine of its own, a sequence per lane, eng's
// context and threads — refused, by that flag, when its vocabulary is not
// eng's. As llama-server's, the draft model serves the default model
// (o.ModelPath) only: any other this process loads (a --fim-model, a model
// loaded on demand) and a model whose sequences cannot be cut back after a
// draft run without drafts. nil, nil when there is nothing to open.
func openDrafter(spec ModelSpec, o *Options, eng *cgo.Engine) (*cgo.Drafter, error) {
	s := &o.Sched.Speculation
	if desc := eng.Descriptor(); speculates(spec, *o) && !desc.Drafts {
		slog.Warn("speculation off for this model", "model", spec.Path, "architecture", desc.Architecture, "reason", desc.DraftsRefused)
		*s = sched.Speculation{}
		return nil, nil
	}
	if s.Type == sched.SpecDraftMTP {
		return nil, openMTPDrafter(spec, o, eng)
	}
	if s.Type != sched.SpecDraftSimple {
		return nil, nil
	}
	desc := eng.Descriptor()
	if spec.Path != o.ModelPath || !desc.Drafts {
		*s = sched.Speculation{}
		return nil, nil
	}
	d, err := cgo.Open(cgo.Options{ModelPath: s.DraftModel, Ctx: desc.Ctx, Lanes: desc.Lanes, Seqs: desc.Lanes,
		Batch: cgo.DefaultUBatch, Threads: o.Threads, FlashAttn: o.FlashAttn, Poll: o.Poll})
	if err != nil {
		return nil, fmt.Errorf("--spec-draft-model %s: %w", s.DraftModel, err)
	}
	dr, err := cgo.NewDrafter(d, eng, float32(s.DraftPMin))
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("--spec-draft-model %s: %w", s.DraftModel, err)
	}
	s.Drafter = dr
	return dr, nil
}

// speculates: the engine of spec is asked for drafts: n-gram drafts on
// any model, a draft model's or the MTP layers' on the default one only.
func speculates(spec ModelSpec, o Options) bool {
	switch t := o.Sched.Speculation.Type; t {
	case "", sched.SpecNone:
		return false
	case sched.SpecDraftSimple, sched.SpecDraftMTP:
		return spec.Path == o.ModelPath
	default:
		return true
	}
}

// draftBound is what the engine of spec is opened with for drafts
// (cgo.Options.DraftMax): the longest draft when it speculates, else 0.
func draftBound(spec ModelSpec, o Options) int {
	if !speculates(spec, o) {
		return 0
	}
	if n := o.Sched.Speculation.DraftMax; n > 0 {
		return n
	}
	return sched.DefaultDraftMax
}

// wantsMTP: the model at spec is opened with its multi-token prediction
// layers (--spec-type draft-mtp), which, as llama-server's, serve the
// default model only.
func wantsMTP(spec ModelSpec, o Options) bool {
	return o.Sched.Speculation.Type == sched.SpecDraftMTP && spec.Path == o.ModelPath
}

// openMTPDrafter gives o's speculation the drafter on eng's own
// multi-token prediction layers (eng was opened with them: wantsMTP);
// any other model runs without drafts.
func openMTPDrafter(spec ModelSpec, o *Options, eng *cgo.Engine) error {
	s := &o.Sched.Speculation
	if !wantsMTP(spec, *o) {
		*s = sched.Speculation{}
		return nil
	}
	dr, err := cgo.NewMTPDrafter(eng, float32(s.DraftPMin))
	if err != nil {
		return fmt.Errorf("--spec-type %s: %w", sched.SpecDraftMTP, err)
	}
	s.Drafter = dr
	return nil
}
