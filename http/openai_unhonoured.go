package http

import (
	"encoding/json"

	"superfluid/http/wire"
)

// oaiChatUnhonoured are the chat-completions fields beyond text generation.
type oaiChatUnhonoured struct {
	Audio            json.RawMessage `json:"audio"`
	Modalities       json.RawMessage `json:"modalities"`
	Verbosity        json.RawMessage `json:"verbosity"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
}

func (u *oaiChatUnhonoured) check() error {
	return wire.RefuseUnhonoured(
		wire.UnhonouredField("audio", u.Audio, nil, wire.WhyModality),
		wire.UnhonouredField("modalities", u.Modalities, wire.TextOnly, wire.WhyModality),
		wire.UnhonouredField("verbosity", u.Verbosity, nil, "this server does not steer the length of replies"),
		wire.UnhonouredField("web_search_options", u.WebSearchOptions, nil, "this server does not search the web"),
	)
}

// oaiUnhonoured is what a chat request may send that the server does not
// honour: OpenAI's own fields and llama.cpp's extensions.
type oaiUnhonoured struct {
	oaiChatUnhonoured
	llamaUnhonoured
}

func (u *oaiUnhonoured) check() error {
	if err := u.oaiChatUnhonoured.check(); err != nil {
		return err
	}
	return u.llamaUnhonoured.Check()
}
