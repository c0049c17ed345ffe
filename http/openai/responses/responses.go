// Package responses is OpenAI's Responses API, which Codex CLI speaks:
// POST /v1/responses runs one assistant turn through the shared chat
// pipeline (task.PlanChat, FollowTurn) and answers it as output items —
// reasoning, a message, function calls — whole or as a stream of events; a
// stored response can be fetched, deleted, and continued by
// previous_response_id. It is part of OpenAI's API, in a package of its
// own because it shares nothing with chat completions but the transport.
package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/reply"
	"superfluid/respstore"
	"superfluid/sched"
	"superfluid/session"
	"superfluid/task"
)

// respJob is a planned response: the generation, the response object as
// far as the request decides it, and the input items to store with it.
type respJob struct {
	m     *task.Model
	g     *task.Request
	obj   respObject
	input []json.RawMessage
	store bool
	// conv is the conversation the turn continues ("" none), convInput
	// the request's input items as it will keep them, pin the request's
	// prefix cache (nil: none) that keeps its prompt warm.
	conv      string
	convInput []Item
	pin       wire.CachePinner
	// prevChain is the previous response's chain ("" none), ownInput the
	// request's own input items (keepChain).
	prevChain string
	ownInput  []json.RawMessage
}

// api is the Responses API's handlers over the server that mounts them.
type api struct {
	host  wire.Host
	store *Store
}

// Routes are the Responses API's routes on h, its responses kept in st.
func Routes(h wire.Host, st *Store) []wire.Route {
	a := &api{host: h, store: st}
	return []wire.Route{
		{Method: "POST", Path: "/v1/responses", API: wire.OpenAI, Handle: a.createResponse, Generates: true},
		// A stored response is the server's, whichever model wrote it.
		{Method: "GET", Path: "/v1/responses/{id}", API: wire.OpenAI, Handle: a.getResponse, AnyModel: true},
		{Method: "DELETE", Path: "/v1/responses/{id}", API: wire.OpenAI, Handle: a.deleteResponse, AnyModel: true},
	}
}

func (a *api) createResponse(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req respRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	// A turn in a conversation holds it from before its items are read
	// until its own are appended.
	release, err := a.claimConversation(req.Conversation)
	if err != nil {
		return err
	}
	streaming := false
	defer func() {
		if !streaming {
			release()
		}
	}()
	job, err := a.planResponse(m, &req, func(t *task.Chat) (sched.Class, error) { return wire.TurnClass(ctx, a.host, t) },
		func(images [][]byte, remote []media.Remote) error {
			return wire.FetchMedia(ctx, a.host, m, images, remote)
		})
	if err != nil {
		return err
	}
	// Submitted by the time the answer returns (a stream's start runs
	// before it answers): the job holds its own reference to the images.
	defer job.g.Media.Close()
	if job.conv != "" {
		// Unrecorded: the conversation's items rebuild the prompt.
		job.pin = wire.MemoryPinner(a.host.Pinner(ctx))
	}
	if req.Stream {
		streaming = true // the stream releases the conversation when it ends
		return a.streamResponses(ctx, job, release)
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	run, err := task.Start(rctx, m, job.g)
	if err != nil {
		return err
	}
	b := newRespBuilder(m, &job.obj, nil)
	out, err := wire.FollowOne(rctx, run, func(evs []reply.Event, _ *task.Delta) error { return b.take(evs) })
	if err != nil {
		return err
	}
	b.finish(job.g, out)
	if err := a.appendTurn(job); err != nil {
		return err
	}
	a.keepResponse(job)
	return wire.WriteJSON(ctx, &job.obj)
}

// planResponse reads the request into a chat turn and plans it; class
// picks the turn's class, fetch fills its remote images.
func (a *api) planResponse(m *task.Model, req *respRequest, class func(*task.Chat) (sched.Class, error),
	fetch func(images [][]byte, remote []media.Remote) error) (_ *respJob, err error) {
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
	rt, err := a.respTurn(req)
	if err != nil {
		return nil, err
	}
	if err := fetch(rt.turn.Images, rt.remote); err != nil {
		return nil, err
	}
	plan, err := task.PlanChat(m, &rt.turn)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			plan.Close() // its images, which a job would have held
		}
	}()
	maxTok, err := task.MaxTokens("max_output_tokens", req.MaxOutputTokens, m.Desc.Ctx)
	if err != nil {
		return nil, err
	}
	smp, err := task.Sampling(m, task.SamplingFields{Temperature: req.Temperature, DefaultTemperature: 1, TopP: req.TopP})
	if err != nil {
		return nil, err
	}
	cls, err := class(&rt.turn)
	if err != nil {
		return nil, err
	}
	g := &task.Request{Spec: task.Spec{Class: cls, MaxTokens: maxTok, Sampling: smp}}
	plan.Apply(&g.Spec)
	job := &respJob{m: m, g: g, input: rt.items, store: req.Store == nil || *req.Store, conv: rt.conv, convInput: rt.convInput,
		prevChain: rt.prevChain, ownInput: rt.items[rt.prevLen:]}
	if rt.conv != "" {
		// The stored record holds the turn's own input: the conversation
		// holds the rest, once.
		job.input = rt.items[rt.convLen:]
	}
	// A record holds job.input unless the chain store holds the items.
	if job.store && (rt.conv != "" || a.store.Chains() == nil) {
		if err := a.storable(job.input); err != nil {
			return nil, err
		}
	}
	job.obj = respObject{
		ID: wire.NewID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
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
	if rt.conv != "" {
		job.obj.Conversation = &respConvRef{ID: rt.conv}
	}
	return job, nil
}

// respTurnOf is what a request asks of the model's turn, read.
type respTurnOf struct {
	turn task.Chat
	// items are the conversation's input items, the previous response's
	// first: what a response chained to this one continues.
	items        []json.RawMessage
	conv         string // the conversation continued, "" none
	convLen      int    // how many of items are the conversation's
	convInput    []Item // the request's input items as the conversation keeps them
	prevLen      int    // how many of items are the previous response's
	prevChain    string // the previous response's chain in the chain store, "" none
	instructions *string
	tools        []json.RawMessage // the function tools, as the response echoes them
	remote       []media.Remote    // the images to fetch into turn.Images
}

// respTurn reads the conversation (the previous response's items, then
// the request's, after the instructions), the tools and how they may be
// called, the answer's format and the reasoning effort.
func (a *api) respTurn(req *respRequest) (respTurnOf, error) {
	var rt respTurnOf
	own, err := respInputItems(req.Input)
	if err != nil {
		return rt, err
	}
	if rt.conv, err = readConversation(req.Conversation); err != nil {
		return rt, err
	}
	var prev []json.RawMessage
	where := func(i int) string {
		if i < len(prev) {
			return fmt.Sprintf("previous_response_id %s: item %d", req.PreviousResponseID, i)
		}
		return fmt.Sprintf("input[%d]", i-len(prev))
	}
	switch {
	case rt.conv != "" && req.PreviousResponseID != "":
		return rt, wire.BadParam("conversation", "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.")
	case rt.conv != "":
		if rt.convInput, err = NewItems(own, "input"); err != nil {
			return rt, err
		}
		prev, err = a.conversationItems(rt.conv)
		rt.convLen = len(prev)
		where = conversationWhere(rt.conv, len(prev))
	default:
		prev, rt.prevChain, err = a.previousItems(req.PreviousResponseID)
		rt.prevLen = len(prev)
	}
	if err != nil {
		return rt, err
	}
	rt.items = append(prev, own...)
	img := respImages{file: a.store.imageFile}
	msgs, err := respConversation(rt.items, where, &img)
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
	rt.turn = task.Chat{Messages: msgs, Tools: tools, Shape: shape, Images: img.images, ImageField: "input"}
	rt.remote = img.remote
	rt.tools = echo
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		if err := wire.Convert(rt.turn.SetEffort("reasoning.effort", *req.Reasoning.Effort)); err != nil {
			return rt, err
		}
	}
	return rt, nil
}

// previousItems are the stored response's input and output items, which
// come before the request's own, and the chain that holds them ("" for a
// record that holds them itself).
func (a *api) previousItems(id string) ([]json.RawMessage, string, error) {
	if id == "" {
		return nil, "", nil
	}
	notFound := func() error {
		e := wire.BadParam("previous_response_id", "Previous response with id '%s' not found.", id)
		e.Code = "previous_response_not_found"
		return e
	}
	rec, err := a.store.get().Get(id)
	if errors.Is(err, respstore.ErrNotFound) {
		return nil, "", notFound()
	}
	if err != nil {
		return nil, "", wire.ServerError("reading the previous response: %v", err)
	}
	if err := previousInConversation(id, rec.Response); err != nil {
		return nil, "", err
	}
	if rec.Chain != "" {
		items, err := a.store.chainItems(rec.Chain)
		if errors.Is(err, session.ErrNotFound) {
			return nil, "", notFound()
		}
		if err != nil {
			return nil, "", wire.ServerError("reading the previous response's items: %v", err)
		}
		return items, rec.Chain, nil
	}
	var input []json.RawMessage
	var resp struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(rec.Input, &input); err != nil {
		return nil, "", wire.ServerError("the stored response %s is damaged: %v", id, err)
	}
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		return nil, "", wire.ServerError("the stored response %s is damaged: %v", id, err)
	}
	return append(input, resp.Output...), "", nil
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
// record's items alone are over what one stored response may hold (a
// record without a chain store keeps its whole chain): it could never be
// stored, and a client chaining on it would find nothing.
func (a *api) storable(items []json.RawMessage) error {
	limit := a.store.get().MaxRecordBytes()
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
func (a *api) keepResponse(job *respJob) {
	if !job.store {
		return
	}
	resp, err := json.Marshal(&job.obj)
	if err == nil {
		rec := respstore.Record{ID: job.obj.ID, Response: resp}
		chain, cerr := a.store.keepChain(job)
		if cerr != nil {
			slog.Warn("responses: the chain store refused the response; its record holds its whole conversation", "id", job.obj.ID, "err", cerr)
		}
		if rec.Chain = chain; chain == "" {
			rec.Input, err = json.Marshal(job.input)
		}
		if err == nil {
			err = a.store.get().Put(rec)
		}
	}
	if err != nil {
		slog.Warn("responses: the response was not stored", "id", job.obj.ID, "err", err)
	}
}

func (a *api) getResponse(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	rec, err := a.store.get().Get(wire.PathID(ctx))
	if err != nil {
		return respStoreError(wire.PathID(ctx), err)
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(rec.Response)
	return nil
}

func (a *api) deleteResponse(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id := wire.PathID(ctx)
	rec, err := a.store.get().Get(id)
	if err != nil {
		return respStoreError(id, err)
	}
	if err := a.store.get().Delete(id); err != nil {
		return respStoreError(id, err)
	}
	a.store.dropChain(rec.Chain)
	return wire.WriteJSON(ctx, respDeleted{ID: id, Object: "response", Deleted: true})
}

func respStoreError(id string, err error) error {
	if errors.Is(err, respstore.ErrNotFound) {
		return notFound("Response with id '%s' not found.", id)
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
