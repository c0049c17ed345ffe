package app

import (
	"superfluid/task"
)

// LoadModel loads the model at o.ModelPath the way serve loads each of
// its models — engine, prefix cache with the tiers o configures, scheduler
// running, chat template and what the core knows of the model prepared —
// with no HTTP listener and no registry: one process, one model, requests
// made through task directly (`superfluid run`). closeModel stops the
// scheduler, parks what the cache holds and frees the engine; call it once
// no request is running.
func LoadModel(o Options) (m *task.Model, closeModel func() error, err error) {
	o.withDefaults()
	ms, err := openModelStack(ModelSpec{Path: o.ModelPath, Alias: o.Alias, LoRA: o.LoRA, MMProj: o.MMProj}, o, nil)
	if err != nil {
		return nil, nil, err
	}
	return &ms.Model.Model, ms.close, nil
}
