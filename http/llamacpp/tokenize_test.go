package llamacpp

import (
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// byteText is a vocabulary of one token per byte, and one special token
// "<s>" (byteBOS) that parse_special reads.
type byteText struct{}

const (
	byteBOS   engine.Token = 256
	byteVocab              = 257
)

func (byteText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	var toks []engine.Token
	if addSpecial {
		toks = append(toks, byteBOS)
	}
	for i := 0; i < len(text); i++ {
		if parseSpecial && len(text)-i >= 3 && text[i:i+3] == "<s>" {
			toks = append(toks, byteBOS)
			i += 2
			continue
		}
		toks = append(toks, engine.Token(text[i]))
	}
	return toks, nil
}

func (byteText) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	if tok == byteBOS {
		if special {
			return append(dst, "<s>"...)
		}
		return dst
	}
	return append(dst, byte(tok))
}

func (t byteText) Detokenize(toks []engine.Token, special bool) string {
	var b []byte
	for _, tok := range toks {
		b = t.AppendPiece(b, tok, special)
	}
	return string(b)
}

func byteModel() *task.Model {
	return &task.Model{Name: "bytes", Desc: &engine.Descriptor{Vocab: byteVocab, Ctx: 512, Lanes: 2, BOS: byteBOS, EOS: -1, EOT: -1}, Text: byteText{}}
}

func decodeBody(body []byte, v any) error {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetBody(body)
	return wire.DecodeJSON(&ctx, v)
}

func FuzzTokenize(f *testing.F) {
	f.Add([]byte(`{"content":"hello <s> world","with_pieces":true,"parse_special":false}`), []byte(`{"tokens":[1,256,300]}`))
	f.Add([]byte(`{"content":""}`), []byte(`{"tokens":[]}`))
	m := byteModel()
	f.Fuzz(func(t *testing.T, tokBody, detokBody []byte) {
		var tr tokenizeRequest
		if decodeBody(tokBody, &tr) == nil {
			if toks, err := tokenizeContent(m, &tr); err == nil && toks == nil {
				t.Fatal("nil tokens encode as null")
			}
		}
		var dr detokenizeRequest
		if decodeBody(detokBody, &dr) == nil {
			if toks, err := detokenizeTokens(m, dr.Tokens); err == nil {
				for _, tok := range toks {
					if int(tok) >= m.Desc.Vocab || tok < 0 {
						t.Fatalf("accepted token %d", tok)
					}
				}
			}
		}
	})
}
