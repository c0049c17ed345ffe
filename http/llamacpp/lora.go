package llamacpp

import (
	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

// loraAdapters is GET /lora-adapters: the model's adapters (id, path, the
// global scale), as llama-server lists them; [] for a model loaded with
// none.
func (a *api) loraAdapters(ctx *fasthttp.RequestCtx, m *task.Model) error {
	list := []task.Adapter{}
	if m.LoRA != nil {
		list = m.LoRA.List()
	}
	return wire.WriteJSON(ctx, list)
}

// setLoRAAdapters is POST /lora-adapters: a body [{"id", "scale"}] makes
// the global scales (an adapter not named gets 0), which requests that
// name no adapter run under from then on; running ones keep theirs.
func (a *api) setLoRAAdapters(ctx *fasthttp.RequestCtx, m *task.Model) error {
	body := ctx.PostBody()
	if err := wire.DecodeBody(body, new([]any)); err != nil {
		return wire.BadRequest("the request body must be an array of {\"id\", \"scale\"} objects: %v", err)
	}
	entries, err := wire.ParseLoRAEntries(body, "lora")
	if err != nil {
		return err
	}
	if m.LoRA == nil {
		if len(entries) == 0 {
			return wire.WriteJSON(ctx, map[string]bool{"success": true})
		}
		return wire.BadParam("lora", "this model was loaded with no LoRA adapter (serve --lora)")
	}
	if err := m.LoRA.SetGlobal(entries, "lora"); err != nil {
		return wire.Convert(err)
	}
	return wire.WriteJSON(ctx, map[string]bool{"success": true})
}
