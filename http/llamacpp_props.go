package http

import (
	"cmp"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
)

// llamaSlot is one entry of /slots (and /props' default_generation_settings).
type llamaSlot struct {
	ID           int           `json:"id"`
	IDTask       int           `json:"id_task"`
	NCtx         int           `json:"n_ctx"`
	Speculative  bool          `json:"speculative"`
	IsProcessing bool          `json:"is_processing"`
	Params       llamaSettings `json:"params"`
}

// llamaProps is GET /props: the defaults a completion runs with and what
// the server serves. Clients read n_ctx and total_slots to size their
// requests, and chat_template to render prompts themselves.
func (s *Server) llamaProps(ctx *fasthttp.RequestCtx, m *Model) error {
	template := m.Desc.ChatTemplate
	if template == "" && m.Chat != nil {
		template = chat.ChatML // what chat requests are rendered with
	}
	return writeJSON(ctx, map[string]any{
		"superfluid_cache":            cacheStatusOf(m),
		"default_generation_settings": llamaSlot{ID: 0, IDTask: -1, NCtx: m.Desc.Ctx, Params: llamaDefaultSettings(m)},
		"total_slots":                 m.Desc.Lanes,
		"model_path":                  m.Path,
		"model_alias":                 m.Name,
		"chat_template":               template,
		"chat_template_caps":          map[string]any{},
		"bos_token":                   tokenText(m, m.Desc.BOS),
		"eos_token":                   tokenText(m, m.Desc.EOS),
		"build_info":                  "superfluid " + s.cfg.Version,
		"modalities":                  map[string]bool{"vision": false, "audio": false},
		"is_sleeping":                 false,
		// Every /infill and suffix request is answered by this model.
		"superfluid_fim_model": cmp.Or(s.registry().FIMName(), m.Name),
	})
}

func tokenText(m *Model, t engine.Token) string {
	if t < 0 || int(t) >= m.Desc.Vocab {
		return ""
	}
	return string(m.Text.AppendPiece(nil, t, true))
}

// llamaSlots is GET /slots: one entry per lane. Lanes are interchangeable
// here — the scheduler hands any free one to the next request and the
// prefix cache is shared — so the count of busy lanes is what is known,
// and the first that many entries show is_processing. With
// ?fail_on_no_slot=1 it answers 503 when every lane is busy, as llama.cpp
// does.
func (s *Server) llamaSlots(ctx *fasthttp.RequestCtx, m *Model) error {
	lanes := m.Desc.Lanes
	busy := 0
	if m.Sched != nil { // an embedding model has no lanes busy generating
		busy = int(m.Sched.Stats().LanesActive)
	}
	if string(ctx.QueryArgs().Peek("fail_on_no_slot")) == "1" && busy >= lanes {
		return unavailable("no slot available")
	}
	params := llamaDefaultSettings(m)
	slots := make([]llamaSlot, lanes)
	for i := range slots {
		slots[i] = llamaSlot{ID: i, IDTask: -1, NCtx: m.Desc.Ctx, IsProcessing: i < busy, Params: params}
	}
	return writeJSON(ctx, slots)
}
