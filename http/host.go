package http

import (
	"net/netip"
	"strings"
)

// DNS rebinding: a page on evil.example whose name the attacker then
// points at 127.0.0.1 reaches the loopback server as its own origin — no
// Origin header on a GET, and the answers readable by the page. Its
// requests still carry "Host: evil.example:PORT", so a server bound to a
// loopback address answers only the names that can only mean this
// machine (as Ollama does): localhost and *.localhost, loopback and
// unspecified IP literals, and the machine's own host name. Bound to any
// other address the server is meant to be reached under other names, and
// the check is off.

// maxHostLen bounds a Host worth matching: a 253-byte name, a port, and
// the brackets of an IPv6 literal.
const maxHostLen = 270

// hostPolicy is the Host check of a server bound to loopback.
type hostPolicy struct {
	hostname string // the machine's name, lower case, without a trailing dot
}

func newHostPolicy(hostname string) *hostPolicy {
	return &hostPolicy{hostname: strings.TrimSuffix(strings.ToLower(hostname), ".")}
}

// allows reports whether a request with this Host header may be served.
// An empty Host (HTTP/1.0 clients) is no browser's, so it passes.
func (p *hostPolicy) allows(host string) bool {
	if host == "" {
		return true
	}
	if len(host) > maxHostLen {
		return false
	}
	name, ok := splitHostHeader(host)
	if !ok {
		return false
	}
	if strings.HasPrefix(name, "[") {
		ip, err := netip.ParseAddr(name[1 : len(name)-1])
		return err == nil && ip.Is6() && localIP(ip)
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		return ip.Is4() && localIP(ip)
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if !hostnameChars(name) {
		return false
	}
	return name == "localhost" || strings.HasSuffix(name, ".localhost") && len(name) > len(".localhost") ||
		p.hostname != "" && name == p.hostname
}

// localIP is a loopback address, or the unspecified one (0.0.0.0, ::),
// which a client on this machine may dial to reach it.
func localIP(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsUnspecified()
}

// splitHostHeader splits "host[:port]" or "[v6][:port]" and returns the
// host ("[v6]" with its brackets); ok is false for anything else —
// user info, a path, a port that is not one, a bare IPv6 literal.
func splitHostHeader(h string) (string, bool) {
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", false
		}
		name, rest := h[:end+1], h[end+1:]
		if rest == "" {
			return name, true
		}
		return name, strings.HasPrefix(rest, ":") && validPort(rest[1:])
	}
	name, port, hasPort := strings.Cut(h, ":")
	if hasPort && !validPort(port) {
		return "", false
	}
	return name, name != ""
}

// hostnameChars is a DNS name's letters, digits, dots, dashes (and
// underscores, which some machines' names hold), nothing else.
func hostnameChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
