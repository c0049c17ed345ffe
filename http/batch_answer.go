package http

import (
	"context"

	"superfluid/batches"
	"superfluid/http/openai"
	"superfluid/http/wire"
	"superfluid/respstore"
	"superfluid/sched"
	"superfluid/session"
	"superfluid/task"
)

// SetResponses gives the Responses API its store (else it keeps one in
// memory).
func (s *Server) SetResponses(st *respstore.Store) { s.responses.Set(st) }

// SetSessions gives the Conversations API (and the Responses API's
// conversation parameter) the store of conversations; without one they
// are kept in memory.
func (s *Server) SetSessions(st *session.Store) { s.responses.SetSessions(st) }

// SetChains gives the Responses API the store its stored responses keep
// their items in (each written once); without one each stored response
// holds its whole conversation.
func (s *Server) SetChains(st *session.Store) { s.responses.SetChains(st) }

// SetBatches gives the server the store behind /v1/files and /v1/batches;
// without one those routes answer that the batch API is off.
func (s *Server) SetBatches(st *batches.Store) {
	s.openai.SetBatches(st)
	s.responses.SetFiles(st) // input_image's file_id
}

// AnswerBatch answers one request of a batch — an OpenAI body for url,
// one of the batch API's routes — as a client's request on that route
// would be answered: the model its body names (loaded if need be), the
// same checks and scheduler, the completion cache; but no socket, no
// HTTP request and no API key (whoever submitted the batch was let in).
// It honours the drain: a server shutting down answers 503. class, when
// set, is the class the request runs in (else the server's default). The
// error is ctx's, when it ended first: then there is no answer.
func (s *Server) AnswerBatch(ctx context.Context, url string, body []byte, class string) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	status, resp := s.answerBatch(ctx, url, body, class)
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	return status, resp, nil
}

// answerBatch is the transport's part of a batch request — the drain, the
// route's model and its kind — before openai.Answer runs it.
func (s *Server) answerBatch(ctx context.Context, url string, body []byte, className string) (int, []byte) {
	r, _, rerr := s.resolve(url, "POST", false)
	if rerr != nil {
		return openai.ErrorResponse(rerr)
	}
	class := s.cfg.DefaultClass
	if className != "" {
		c, err := sched.ParseClass(className)
		if err != nil {
			return openai.ErrorResponse(wire.BadParam("class", "%v", err))
		}
		class = c
	}
	ms := s.registry()
	if ms == nil {
		return openai.ErrorResponse(wire.Unavailable("the model is loading"))
	}
	if !s.gate.enter() {
		return openai.ErrorResponse(wire.Unavailable("the server is shutting down"))
	}
	defer s.gate.leave()
	m, hold, err := acquire(ctx, ms, bodyModelWant(url, body, wire.OpenAI), wire.OpenAI)
	if err != nil {
		return openai.ErrorResponse(err)
	}
	defer hold.done()
	if err := checkModelKind(m, r); err != nil {
		return openai.ErrorResponse(err)
	}
	// A batch's lines fan out together: an idle runner gathers them.
	arrived := announce(m, r)
	defer arrived()
	return openai.Answer(task.Announced(ctx, arrived), &m.Model, url, body, class, s.fimCache, s.cfg.RemoteMedia)
}
