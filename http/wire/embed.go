package wire

import (
	"encoding/base64"
	"encoding/binary"
	"math"

	"github.com/valyala/fasthttp"

	"superfluid/sched"
	"superfluid/task"
)

// RunEmbed embeds every input of r for the request ctx: refused by the
// model first, then in the class the X-Superfluid-Class header names
// (Background by default, so that indexing a repository never slows a
// person's completions), under the request's context.
func RunEmbed(ctx *fasthttp.RequestCtx, h Host, m *task.Model, r *task.EmbedRequest) (task.Embedding, error) {
	if err := r.CheckEmbed(m); err != nil {
		return task.Embedding{}, Convert(err)
	}
	class, err := Class(ctx, "", sched.Background)
	if err != nil {
		return task.Embedding{}, err
	}
	rctx, done := h.RequestContext(ctx)
	defer done()
	res, err := task.Embed(rctx, m, class, r)
	return res, Convert(err)
}

// Base64Floats is v as OpenAI's encoding_format "base64" sends it: the
// little-endian float32 bytes, base64-encoded (what numpy.frombuffer
// with dtype float32 reads back).
func Base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// EmbedNormParam reads llama.cpp's embd_normalize: an integer ≥ -1.
func EmbedNormParam(n *int64) (int, error) {
	if n == nil {
		return task.NormL2, nil
	}
	if *n < task.NormNone || *n > math.MaxInt32 {
		return 0, BadParam("embd_normalize", "embd_normalize must be -1 (none), 0 (max absolute), 1 (taxicab), 2 (euclidean) or a larger p-norm, got %d", *n)
	}
	return int(*n), nil
}
