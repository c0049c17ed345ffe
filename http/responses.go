package http

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/respstore"
	"superfluid/task"
)

// OpenAI's Responses API, which Codex CLI speaks: POST /v1/responses runs
// one assistant turn through the shared chat pipeline (task.PlanChat,
// followTurn) and answers it as output items — reasoning, a message,
// function calls — whole or as a stream of events; a stored response can
// be fetched, deleted, and continued by previous_response_id.

func responsesRoutes() map[string][]route {
	r := func(method string, h func(*Server, *fasthttp.RequestCtx, *Model) error) route {
		return route{method: method, kind: wire.OpenAI, handler: h}
	}
	modelFree := func(rt route) route { rt.anyModel = true; return rt }
	return map[string][]route{
		"/v1/responses": {r("POST", (*Server).createResponse)},
		// A stored response is the server's, whichever model wrote it.
		"/v1/responses/{id}": {modelFree(r("GET", (*Server).getResponse)), modelFree(r("DELETE", (*Server).deleteResponse))},
	}
}

// respStore is the server's store of responses: the one the app opened
// under --data-dir, else, at first use, one in memory.
type respStore struct {
	ptr  atomic.Pointer[respstore.Store]
	once sync.Once
}

// SetResponses gives the server the store of the Responses API.
func (s *Server) SetResponses(st *respstore.Store) { s.responses.ptr.Store(st) }

func (s *Server) responseStore() *respstore.Store {
	s.responses.once.Do(func() {
		mem, _ := respstore.Open("", respstore.Options{}) // a memory store cannot fail to open
		s.responses.ptr.CompareAndSwap(nil, mem)
	})
	return s.responses.ptr.Load()
}

// respJob is a planned response: the generation, the response object as
// far as the request decides it, and the input items to store with it.
type respJob struct {
	m     *Model
	g     *task.Request
	obj   respObject
	input []json.RawMessage
	store bool
}

func (s *Server) createResponse(ctx *fasthttp.RequestCtx, m *Model) error {
	var req respRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	job, err := s.planResponse(ctx, m, &req)
	if err != nil {
		return err
	}
	if req.Stream {
		return s.streamResponses(ctx, job)
	}
	rctx, done := s.requestContext(ctx)
	defer done()
	run, err := wire.StartOne(rctx, &m.Model, job.g, false)
	if err != nil {
		return err
	}
	b := newRespBuilder(m, &job.obj, nil)
	out, err := wire.FollowOne(rctx, run, func(evs []reply.Event, _ *task.Delta) error { return b.take(evs) })
	if err != nil {
		return err
	}
	b.finish(job.g, out)
	s.keepResponse(job)
	return wire.WriteJSON(ctx, &job.obj)
}

// planResponse reads the request into a chat turn and plans it.
func (s *Server) planResponse(ctx *fasthttp.RequestCtx, m *Model, req *respRequest) (*respJob, error) {
	if err := req.respUnhonoured.check(); err != nil {
		return nil, err
	}
	if req.Text == nil {
		req.Text = &respTextConfig{}
	}
	if err := wire.RefuseUnhonoured(wire.UnhonouredField("text.verbosity", req.Text.Verbosity, wire.StringIn("medium"), "this server does not steer the length of replies")); err != nil {
		return nil, err
	}
	if !task.IsNull(req.Metadata) && !isObject(req.Metadata) {
		return nil, wire.BadParam("metadata", "metadata must be an object of strings")
	}
	rt, err := s.respTurn(req)
	if err != nil {
		return nil, err
	}
	plan, err := wire.Result(task.PlanChat(&m.Model, &rt.turn))
	if err != nil {
		return nil, err
	}
	maxTok, err := wire.MaxTokens("max_output_tokens", req.MaxOutputTokens, m.Desc.Ctx)
	if err != nil {
		return nil, err
	}
	smp, err := wire.Sampling(&m.Model, task.SamplingFields{Temperature: req.Temperature, DefaultTemperature: 1, TopP: req.TopP})
	if err != nil {
		return nil, err
	}
	class, err := wire.TurnClass(ctx, s.host(), &rt.turn)
	if err != nil {
		return nil, err
	}
	g := &task.Request{Spec: task.Spec{Class: class, MaxTokens: maxTok, Sampling: smp}}
	plan.Apply(&g.Spec)
	job := &respJob{m: m, g: g, input: rt.items, store: req.Store == nil || *req.Store}
	if job.store {
		if err := s.storable(rt.items); err != nil {
			return nil, err
		}
	}
	job.obj = respObject{
		ID: wire.NewID("resp_"), Object: "response", CreatedAt: unixNow(), Status: "in_progress",
		Instructions: rt.instructions, MaxOutputTokens: req.MaxOutputTokens, Model: m.Name,
		Output: []respItemOut{}, ParallelToolCalls: !rt.turn.Tools.Req.Single, Store: job.store,
		Temperature: valueOr(req.Temperature, 1), TopP: valueOr(req.TopP, 1),
		Text: respTextOut{Format: rawOr(req.Text.Format, `{"type":"text"}`)}, ToolChoice: rawOr(req.ToolChoice, `"auto"`),
		Tools: rt.tools, Truncation: "disabled", Metadata: rawOr(req.Metadata, `{}`),
	}
	if req.Reasoning != nil {
		job.obj.Reasoning = *req.Reasoning
	}
	if req.PreviousResponseID != "" {
		job.obj.PreviousResponseID = &req.PreviousResponseID
	}
	return job, nil
}

// respTurnOf is what a request asks of the model's turn, read.
type respTurnOf struct {
	turn task.Chat
	// items are the conversation's input items, the previous response's
	// first: what a response chained to this one continues.
	items        []json.RawMessage
	instructions *string
	tools        []json.RawMessage // the function tools, as the response echoes them
}

// respTurn reads the conversation (the previous response's items, then
// the request's, after the instructions), the tools and how they may be
// called, the answer's format and the reasoning effort.
func (s *Server) respTurn(req *respRequest) (respTurnOf, error) {
	var rt respTurnOf
	own, err := respInputItems(req.Input)
	if err != nil {
		return rt, err
	}
	prev, err := s.previousItems(req.PreviousResponseID)
	if err != nil {
		return rt, err
	}
	rt.items = append(prev, own...)
	msgs, err := respConversation(rt.items, func(i int) string {
		if i < len(prev) {
			return fmt.Sprintf("previous_response_id %s: item %d", req.PreviousResponseID, i)
		}
		return fmt.Sprintf("input[%d]", i-len(prev))
	})
	if err != nil {
		return rt, err
	}
	if rt.instructions, err = respInstructions(req.Instructions); err != nil {
		return rt, err
	}
	if rt.instructions != nil {
		msgs = append([]chat.Message{{Role: chat.RoleSystem, Content: *rt.instructions}}, msgs...)
	}
	tools, echo, err := respTools(req.Tools)
	if err != nil {
		return rt, err
	}
	parallel := req.ParallelToolCalls == nil || *req.ParallelToolCalls
	if err := respToolChoice(&tools, req.ToolChoice, parallel); err != nil {
		return rt, err
	}
	shape, err := respFormat(req.Text.Format)
	if err != nil {
		return rt, err
	}
	rt.turn = task.Chat{Messages: msgs, Tools: tools, Shape: shape}
	rt.tools = echo
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		if err := wire.Convert(rt.turn.SetEffort("reasoning.effort", *req.Reasoning.Effort)); err != nil {
			return rt, err
		}
	}
	return rt, nil
}

// previousItems are the stored response's input and output items, which
// come before the request's own.
func (s *Server) previousItems(id string) ([]json.RawMessage, error) {
	if id == "" {
		return nil, nil
	}
	rec, err := s.responseStore().Get(id)
	if errors.Is(err, respstore.ErrNotFound) {
		e := wire.BadParam("previous_response_id", "Previous response with id '%s' not found.", id)
		e.Code = "previous_response_not_found"
		return nil, e
	}
	if err != nil {
		return nil, wire.ServerError("reading the previous response: %v", err)
	}
	var input []json.RawMessage
	var resp struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(rec.Input, &input); err != nil {
		return nil, wire.ServerError("the stored response %s is damaged: %v", id, err)
	}
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		return nil, wire.ServerError("the stored response %s is damaged: %v", id, err)
	}
	return append(input, resp.Output...), nil
}

// respInstructions reads instructions: a string, or null.
func respInstructions(raw json.RawMessage) (*string, error) {
	if task.IsNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, wire.BadParam("instructions", "instructions must be a string")
	}
	return &s, nil
}

// storable refuses, before it runs, a request to store a response whose
// conversation alone is over what one stored response may hold (each
// record keeps its whole chain): it could never be stored, and a client
// chaining on it would find nothing.
func (s *Server) storable(items []json.RawMessage) error {
	limit := s.responseStore().MaxRecordBytes()
	if limit <= 0 {
		return nil
	}
	size := int64(0)
	for _, it := range items {
		size += int64(len(it)) + 1
	}
	if size > limit {
		return wire.BadParam("store", "the conversation is %d bytes, over the %d bytes a stored response may hold (--max-stored-response-bytes); send store: false, or start a new conversation", size, limit)
	}
	return nil
}

// keepResponse stores a finished response, unless the request said
// store: false. A store that fails is logged: the client has its answer.
func (s *Server) keepResponse(job *respJob) {
	if !job.store {
		return
	}
	resp, err := json.Marshal(&job.obj)
	if err == nil {
		var input []byte
		if input, err = json.Marshal(job.input); err == nil {
			err = s.responseStore().Put(respstore.Record{ID: job.obj.ID, Response: resp, Input: input})
		}
	}
	if err != nil {
		slog.Warn("responses: the response was not stored", "id", job.obj.ID, "err", err)
	}
}

func (s *Server) getResponse(ctx *fasthttp.RequestCtx, _ *Model) error {
	rec, err := s.responseStore().Get(pathID(ctx))
	if err != nil {
		return respStoreError(pathID(ctx), err)
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(rec.Response)
	return nil
}

func (s *Server) deleteResponse(ctx *fasthttp.RequestCtx, _ *Model) error {
	id := pathID(ctx)
	if err := s.responseStore().Delete(id); err != nil {
		return respStoreError(id, err)
	}
	return wire.WriteJSON(ctx, respDeleted{ID: id, Object: "response", Deleted: true})
}

func respStoreError(id string, err error) error {
	if errors.Is(err, respstore.ErrNotFound) {
		e := wire.NotFound("Response with id '%s' not found.", id)
		e.Type, e.Code = "invalid_request_error", ""
		return e
	}
	return wire.ServerError("%v", err)
}

func isObject(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil
}

func valueOr(p *float64, d float64) float64 {
	if p == nil {
		return d
	}
	return *p
}

func rawOr(raw json.RawMessage, d string) json.RawMessage {
	if task.IsNull(raw) {
		return json.RawMessage(d)
	}
	return raw
}

// mergeRoutes joins route tables whose paths hold several methods.
func mergeRoutes(parts ...map[string][]route) map[string][]route {
	all := map[string][]route{}
	for _, p := range parts {
		for path, rs := range p {
			all[path] = append(all[path], rs...)
		}
	}
	return all
}
