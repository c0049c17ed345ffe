package llamacpp

import (
	"cmp"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// slot is one entry of /slots (and /props' default_generation_settings).
type slot struct {
	ID           int      `json:"id"`
	IDTask       int      `json:"id_task"`
	NCtx         int      `json:"n_ctx"`
	Speculative  bool     `json:"speculative"`
	IsProcessing bool     `json:"is_processing"`
	Params       Settings `json:"params"`
}

// props is GET /props: the defaults a completion runs with and what
// the server serves. Clients read n_ctx and total_slots to size their
// requests, and chat_template to render prompts themselves.
func (a *api) props(ctx *fasthttp.RequestCtx, m *task.Model) error {
	template := m.Desc.ChatTemplate
	if template == "" && m.Chat != nil {
		template = chat.ChatML // what chat requests are rendered with
	}
	return wire.WriteJSON(ctx, map[string]any{
		"superfluid_cache":            a.host.CacheStatus(ctx),
		"default_generation_settings": slot{ID: 0, IDTask: -1, NCtx: m.Desc.Ctx, Params: DefaultSettings(m)},
		"total_slots":                 m.Desc.Lanes,
		"model_path":                  m.Path,
		"model_alias":                 m.Name,
		"chat_template":               template,
		"chat_template_caps":          map[string]any{},
		"bos_token":                   tokenText(m, m.Desc.BOS),
		"eos_token":                   tokenText(m, m.Desc.EOS),
		"build_info":                  "superfluid " + a.host.Settings().Version,
		"modalities":                  map[string]bool{"vision": m.Sees(), "audio": m.Hears()},
		// What stands for an image or audio in a multimodal_data prompt (llama-server
		// draws its own; clients read it here).
		"media_marker": task.MediaMarker,
		"is_sleeping":  false,
		// Every /infill and suffix request is answered by this model.
		"superfluid_fim_model": cmp.Or(a.host.FIMModel(), m.Name),
	})
}

func tokenText(m *task.Model, t engine.Token) string {
	if t < 0 || int(t) >= m.Desc.Vocab {
		return ""
	}
	return string(m.Text.AppendPiece(nil, t, true))
}

// slots is GET /slots: one entry per lane. Lanes are interchangeable
// here — the scheduler hands any free one to the next request and the
// prefix cache is shared — so the count of busy lanes is what is known,
// and the first that many entries show is_processing. With
// ?fail_on_no_slot=1 it answers 503 when every lane is busy, as llama.cpp
// does.
func (a *api) slots(ctx *fasthttp.RequestCtx, m *task.Model) error {
	lanes := m.Desc.Lanes
	busy := 0
	if m.Sched != nil { // an embedding model has no lanes busy generating
		busy = int(m.Sched.Stats().LanesActive)
	}
	if string(ctx.QueryArgs().Peek("fail_on_no_slot")) == "1" && busy >= lanes {
		return wire.Unavailable("no slot available")
	}
	params := DefaultSettings(m)
	slots := make([]slot, lanes)
	for i := range slots {
		slots[i] = slot{ID: i, IDTask: -1, NCtx: m.Desc.Ctx, IsProcessing: i < busy, Params: params}
	}
	return wire.WriteJSON(ctx, slots)
}
