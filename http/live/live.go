// Package live is the server's live status on the route seam: GET
// /v1/status answers it as JSON (package status's shape), GET
// /v1/status/events streams it as server-sent events. The web page and
// `superfluid ps` and `top` read it. It keeps the throughput ring: a
// sampler runs from the server's start until it stops, so a view opened
// late still plots the last minutes.
package live

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/status"
	"superfluid/task"
)

// Event stream pacing: an event every beat, and one as soon as what runs
// or waits changes, at most every minGap.
const (
	beat   = time.Second
	minGap = 250 * time.Millisecond
)

// api is the status routes over one host: the ring its sampler fills.
type api struct {
	h    wire.Host
	ring *throughputRing
}

// Routes are the status routes; the throughput sampler starts with them
// and stops when the server does (Host.Stopping).
func Routes(h wire.Host) []wire.Route {
	a := &api{h: h, ring: &throughputRing{}}
	go a.ring.run(h.Stopping(), h, SampleEvery)
	return []wire.Route{
		{Method: "GET", Path: "/v1/status", API: wire.OpenAI, Handle: a.status, AnyModel: true, Loading: true, Body: wire.BodyControl},
		{Method: "GET", Path: "/v1/status/events", API: wire.OpenAI, Handle: a.events, AnyModel: true, Loading: true, Body: wire.BodyControl},
	}
}

// current is the server's status now, as the request's key may see it
// (a key with a model list sees those models only).
func (a *api) current(ctx *fasthttp.RequestCtx) status.Status {
	return collect(a.h.Settings(), a.h.Loaded(ctx), time.Now(), a.ring.snapshot())
}

func (a *api) status(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	if err := refuseQuery(ctx); err != nil {
		return err
	}
	return wire.WriteJSON(ctx, a.current(ctx))
}

// events streams a "status" event each beat, and sooner (after minGap)
// when a lane, a queue or the models change, until the client goes or the
// server stops.
func (a *api) events(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	if err := refuseQuery(ctx); err != nil {
		return err
	}
	if ctx.IsHead() {
		ctx.SetContentType("text/event-stream") // what a GET would stream, without the stream
		return nil
	}
	stopping := a.h.Stopping()
	return a.h.Stream(ctx, true, nil, func(rctx context.Context, _ context.CancelFunc, ew *wire.EventWriter) {
		// The stream runs before fasthttp releases ctx, so its key
		// still says which models each status may show.
		a.follow(rctx, stopping, func() status.Status { return a.current(ctx) }, ew.Send)
	})
}

// follow sends statuses through send until ctx or stopping ends or a send
// fails (the client went).
func (a *api) follow(ctx, stopping context.Context, current func() status.Status, send func(event string, v any) error) {
	t := time.NewTicker(minGap)
	defer t.Stop()
	var lastSent time.Time
	lastShape := ""
	for {
		st := current()
		shape := shapeOf(&st)
		if lastSent.IsZero() || shape != lastShape || st.Now.Sub(lastSent) >= beat-minGap/2 {
			if send("status", st) != nil {
				return
			}
			lastSent, lastShape = st.Now, shape
		}
		select {
		case <-ctx.Done():
			return
		case <-stopping.Done():
			return
		case <-t.C:
		}
	}
}

// shapeOf is what a view would redraw at once when it changes: each
// lane's request and phase, the queues' lengths and the models loaded.
func shapeOf(st *status.Status) string {
	var b strings.Builder
	for _, m := range st.Models {
		b.WriteString(m.Name)
		b.WriteByte(',')
	}
	for _, l := range st.Lanes {
		b.WriteString(l.Phase)
		b.WriteString(strconv.FormatUint(l.ID, 10))
		b.WriteByte(',')
	}
	for _, q := range st.Queues {
		b.WriteString(strconv.Itoa(q.Waiting))
		b.WriteByte(',')
	}
	return b.String()
}

// refuseQuery answers a query parameter by name: the status routes take
// none, and a parameter asking for a filter or a format would otherwise be
// silently ignored.
func refuseQuery(ctx *fasthttp.RequestCtx) error {
	var names []string
	ctx.QueryArgs().VisitAll(func(k, _ []byte) { names = append(names, string(k)) })
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return wire.BadParam(names[0], "%s takes no query parameters, not %q", ctx.Path(), names[0])
}
