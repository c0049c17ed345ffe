package http

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// A web page the user has open can send requests to the loopback server:
// its browser adds an Origin header naming the page's site. originPolicy
// says which sites may (Ollama's OLLAMA_ORIGINS and its defaults): pages
// on this machine (localhost, 127.0.0.1, [::1], 0.0.0.0 on any port, over
// http or https), desktop shells (app://, file://, tauri://,
// vscode-webview://), the server's own origin, and the patterns the user
// adds. Requests without an Origin (CLIs, SDKs, editors) never meet it.

// defaultOrigins are allowed unless nothing else is: a port ("…:*")
// matches digits only; a scheme's "*" matches one host[:port].
var defaultOrigins = []string{
	"http://localhost", "https://localhost", "http://localhost:*", "https://localhost:*",
	"http://127.0.0.1", "https://127.0.0.1", "http://127.0.0.1:*", "https://127.0.0.1:*",
	"http://[::1]", "https://[::1]", "http://[::1]:*", "https://[::1]:*",
	"http://0.0.0.0", "https://0.0.0.0", "http://0.0.0.0:*", "https://0.0.0.0:*",
	"app://*", "file://*", "tauri://*", "vscode-webview://*",
}

// maxOriginLen bounds an Origin worth matching: a browser's is a scheme
// and a host name (at most 253 bytes) with a port.
const maxOriginLen = 512

// originPattern is an allowed origin, lower case: exact, or with one "*"
// between prefix and suffix.
type originPattern struct {
	prefix, suffix string
	wild           bool
}

type originPolicy struct {
	any      bool // "*": every origin
	patterns []originPattern
}

// newOriginPolicy is the defaults, own (the server's own origins, exact)
// and extra, the user's patterns; it refuses a pattern a browser's
// Origin could never match, so a typo is not a silent no-op.
func newOriginPolicy(own, extra []string) (*originPolicy, error) {
	p := &originPolicy{}
	for _, s := range extra {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if s == "*" {
			p.any = true
			continue
		}
		pat, err := parseOriginPattern(s)
		if err != nil {
			return nil, err
		}
		p.patterns = append(p.patterns, pat)
	}
	for _, s := range append(append([]string(nil), defaultOrigins...), own...) {
		pat, err := parseOriginPattern(s)
		if err != nil {
			return nil, fmt.Errorf("http: built-in origin %q: %w", s, err)
		}
		p.patterns = append(p.patterns, pat)
	}
	return p, nil
}

func parseOriginPattern(s string) (originPattern, error) {
	ls := strings.ToLower(s)
	if !originChars(ls, true) {
		return originPattern{}, fmt.Errorf("http: allowed origin %q: want scheme://host[:port], printable ASCII, at most one *", s)
	}
	if ls == "null" { // sandboxed frames and some file pages: only when asked for
		return originPattern{prefix: ls}, nil
	}
	scheme, rest, ok := strings.Cut(ls, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "*:/") || strings.ContainsAny(rest, "/?#@") {
		return originPattern{}, fmt.Errorf("http: allowed origin %q: want scheme://host[:port] (an Origin has no path), with at most one *", s)
	}
	switch strings.Count(ls, "*") {
	case 0:
		return originPattern{prefix: ls}, nil
	case 1:
		pre, suf, _ := strings.Cut(ls, "*")
		return originPattern{prefix: pre, suffix: suf, wild: true}, nil
	}
	return originPattern{}, fmt.Errorf("http: allowed origin %q: at most one * (as OLLAMA_ORIGINS)", s)
}

// originChars reports whether s is printable ASCII without spaces, and
// (for a pattern) holds at most the "*" a pattern may.
func originChars(s string, pattern bool) bool {
	if s == "" || len(s) > maxOriginLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '*' && !pattern {
			return false
		}
	}
	return true
}

// allows reports whether a request with this Origin header may be served.
func (p *originPolicy) allows(origin string) bool {
	if p.any {
		return true
	}
	o := strings.ToLower(origin)
	if !originChars(o, false) {
		return false
	}
	for _, pat := range p.patterns {
		if pat.matches(o) {
			return true
		}
	}
	return false
}

func (pat originPattern) matches(o string) bool {
	if !pat.wild {
		return o == pat.prefix
	}
	if len(o) < len(pat.prefix)+len(pat.suffix) || !strings.HasPrefix(o, pat.prefix) || !strings.HasSuffix(o, pat.suffix) {
		return false
	}
	span := o[len(pat.prefix) : len(o)-len(pat.suffix)]
	if strings.HasSuffix(pat.prefix, ":") && pat.suffix == "" && !strings.HasSuffix(pat.prefix, "://") {
		return validPort(span) // "http://localhost:*"
	}
	// The span stands in for host name characters (and a port): never a
	// path, user info or another origin ("http://*.example.com" must not
	// match "http://evil.com/.example.com" or "http://a@evil.com#.example.com").
	for i := 0; i < len(span); i++ {
		c := span[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// validPort is 1 to 5 digits, at most 65535.
func validPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(s)
	return err == nil && n <= 65535
}

// ownOrigins are the origins of a server listening at addr, when it
// names one address (a wildcard address is served under many names; the
// loopback ones are among the defaults).
func ownOrigins(addr netip.AddrPort) []string {
	ip := addr.Addr().Unmap()
	if !ip.IsValid() || ip.IsUnspecified() {
		return nil
	}
	hostport := netip.AddrPortFrom(ip.WithZone(""), addr.Port()).String()
	return []string{"http://" + hostport, "https://" + hostport}
}

// sameOrigin reports whether a request's Origin names the very host and
// port its Host header does: a page this server served (the built-in web
// page) calling back to it, under whatever name the user typed. That is
// safe to allow when the Host itself was checked (a loopback server's
// Host rule: the name is this machine's), or when it is an IP literal,
// which no DNS rebinding can point elsewhere; a server bound beyond
// loopback and reached by a DNS name needs that origin allowed by name.
func sameOrigin(origin, host string, hostChecked bool) bool {
	o := strings.ToLower(origin)
	if !originChars(o, false) || host == "" {
		return false
	}
	_, rest, ok := strings.Cut(o, "://")
	if !ok || !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") || rest != strings.ToLower(host) {
		return false
	}
	name, ok := splitHostHeader(rest)
	if !ok {
		return false
	}
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return true
	}
	return hostChecked && hostnameChars(name)
}
