package wire

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"superfluid/media"
	"superfluid/task"
)

// FetchMedia fills the request's remote images (their slots in images)
// under the request's context, when the server fetches remote media; a
// server that does not refuses them, naming the field and the flag. Every
// failure is a 400 naming the field, with the reason. Nothing is fetched
// for a model without a projector: task.NewMediaPrompt refuses its images.
func FetchMedia(ctx *fasthttp.RequestCtx, h Host, m *task.Model, images [][]byte, remote []media.Remote) error {
	f := h.Settings().RemoteMedia
	if len(remote) == 0 || f == nil || m.Media == nil {
		return FetchMediaWith(context.Background(), f, m, images, remote)
	}
	rctx, done := h.RequestContext(ctx)
	defer done()
	return FetchMediaWith(rctx, f, m, images, remote)
}

// FetchMediaWith is FetchMedia with the fetcher (nil: none) and the
// context given, for a request without a transport (a batch line).
func FetchMediaWith(ctx context.Context, f *media.Fetcher, m *task.Model, images [][]byte, remote []media.Remote) error {
	if len(remote) == 0 || m.Media == nil {
		return nil
	}
	if f == nil {
		r := remote[0]
		e := BadParam(r.Field, "%s: remote image URLs are fetched only when the server runs with --allow-remote-media; send the image inline (a data URL or base64)", r.At)
		e.Code = "unsupported_parameter"
		return e
	}
	err := f.FetchAll(ctx, images, remote)
	var fe *media.FetchError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return BadParam(fe.Remote.Field, "%v", fe)
	}
	return BadParam(remote[0].Field, "%s: fetching remote images: %v", remote[0].At, err)
}

// remoteImage reads an image reference that is not a data URL: an http(s)
// URL is kept for FetchMedia at the image's slot (the images slice holds
// nil there until then); any other scheme is refused by name.
func remoteImage(u, field, at string, images *[][]byte, remote *[]media.Remote) error {
	if err := media.CheckURL(u); err != nil {
		return err
	}
	*remote = append(*remote, media.Remote{Index: len(*images), URL: u, Field: field, At: at})
	*images = append(*images, nil)
	return nil
}
