package http

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"superfluid/batches"
	"superfluid/http/wire"
)

// uploadFile stores the "file" part of a multipart/form-data request with
// the "purpose" field. The body is in memory already (bounded by
// Config.MaxBody); the server does not pre-parse forms, so it is parsed
// here, for this route only.
func (s *Server) uploadFile(ctx *fasthttp.RequestCtx, _ *Model) error {
	if !bytes.HasPrefix(ctx.Request.Header.ContentType(), []byte("multipart/form-data")) {
		return wire.BadRequest("a file upload is multipart/form-data with the fields purpose and file")
	}
	form, err := ctx.MultipartForm()
	if err != nil {
		return wire.BadRequest("malformed multipart/form-data: %v", err)
	}
	defer ctx.Request.RemoveMultipartFormFiles()
	purpose := ""
	if v := form.Value["purpose"]; len(v) > 0 {
		purpose = v[0]
	}
	if purpose == "" {
		return wire.BadParam("purpose", "purpose is required")
	}
	fhs := form.File["file"]
	if len(fhs) != 1 {
		return wire.BadParam("file", "want one file in the field \"file\", got %d", len(fhs))
	}
	st, err := s.store()
	if err != nil {
		return err
	}
	f, err := fhs[0].Open()
	if err != nil {
		return wire.ServerError("reading the upload: %v", err)
	}
	defer f.Close()
	obj, err := st.CreateFile(fhs[0].Filename, purpose, f)
	if err != nil {
		return batchError(err)
	}
	return wire.WriteJSON(ctx, obj)
}

func (s *Server) listFiles(ctx *fasthttp.RequestCtx, _ *Model) error {
	p, err := listParams(ctx)
	if err != nil {
		return err
	}
	return answerFromStore(s, ctx, func(st *batches.Store) (batches.Page[batches.File], error) { return st.Files(p) })
}

func (s *Server) getFile(ctx *fasthttp.RequestCtx, _ *Model) error {
	return answerFromStore(s, ctx, func(st *batches.Store) (batches.File, error) { return st.File(pathID(ctx)) })
}

func (s *Server) deleteFile(ctx *fasthttp.RequestCtx, _ *Model) error {
	id := pathID(ctx)
	return answerFromStore(s, ctx, func(st *batches.Store) (map[string]any, error) {
		return map[string]any{"id": id, "object": "file", "deleted": true}, st.DeleteFile(id)
	})
}

// fileContent sends a file's bytes; fasthttp streams them from disk and
// closes the file when the response is written. The write timeout bounds
// a stalled download, not a long one (progressBody).
func (s *Server) fileContent(ctx *fasthttp.RequestCtx, _ *Model) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	f, obj, err := st.OpenFile(pathID(ctx))
	if err != nil {
		return batchError(err)
	}
	fi, err := f.Stat() // the size on disk, whatever the object says
	if err != nil {
		f.Close()
		return wire.ServerError("reading %s: %v", obj.ID, err)
	}
	ctx.SetContentType("application/octet-stream")
	ctx.SetBodyStream(s.progressBody(ctx, f), int(fi.Size()))
	return nil
}
