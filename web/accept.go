package web

import (
	"strconv"
	"strings"
)

// PrefersHTML reports whether an Accept header asks for HTML before
// anything else: text/html (or XHTML) named with a weight no other type
// beats. Browsers send "text/html,…,*/*;q=0.8"; Ollama's clients and
// curl send nothing or "*/*", and keep getting Ollama's text.
func PrefersHTML(accept string) bool {
	html, best := -1.0, 0.0
	for i, part := range strings.Split(accept, ",") {
		if i >= 64 { // a browser's list is a handful; a longer one is no browser's
			break
		}
		typ, params, _ := strings.Cut(part, ";")
		typ = strings.ToLower(strings.TrimSpace(typ))
		q := weight(params)
		if typ == "text/html" || typ == "application/xhtml+xml" {
			html = max(html, q)
			continue
		}
		best = max(best, q)
	}
	return html > 0 && html >= best
}

// weight is a media range's q parameter: 1 when absent, 0 when malformed
// (RFC 9110 allows 0 to 1 with at most three decimals).
func weight(params string) float64 {
	for _, p := range strings.Split(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(q >= 0 && q <= 1) { // NaN too
			return 0
		}
		return q
	}
	return 1
}
