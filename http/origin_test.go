package http

import (
	"net/netip"
	"strings"
	"testing"
)

func TestOriginPolicyDefaults(t *testing.T) {
	p, err := newOriginPolicy(ownOrigins(netip.MustParseAddrPort("192.168.1.5:8080")), nil)
	if err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]bool{
		// Pages on this machine, desktop shells, the server's own origin.
		"http://localhost": true, "http://localhost:3000": true, "https://localhost:8443": true,
		"HTTP://LOCALHOST:3000": true, "http://127.0.0.1:5173": true, "http://0.0.0.0:80": true,
		"http://[::1]:3000": true, "app://obsidian.md": true, "file://": true, "tauri://localhost": true,
		"vscode-webview://1c2ab9e0abc": true, "http://192.168.1.5:8080": true, "https://192.168.1.5:8080": true,
		// Everyone else.
		"http://evil.example": false, "https://evil.example:443": false, "http://192.168.1.5:8081": false,
		"http://localhost.evil.example": false, "http://localhost:3000.evil.example": false,
		"http://localhost:": false, "http://localhost:99999": false, "http://localhost:80a": false,
		"http://localhost:3000/": false, "http://user@localhost:3000": false, "http://evil.example@localhost": false,
		"ftp://localhost": false, "null": false, "http://127.0.0.2": false, "http://[::2]:3000": false,
		"app://x/../evil": false, "file://host/path": false, "vscode-file://vscode-app": false,
		"chrome-extension://abc": false,
		// Hostile bytes: unicode, spaces, controls, very long.
		"http://lоcalhost": false, "http://localhost :3000": false, "http://localhost\t": false,
		"http://localhost:3000\x00": false, "app://" + strings.Repeat("a", 600): false,
		"http://localhost:" + strings.Repeat("1", 1000): false,
	} {
		if got := p.allows(origin); got != want {
			t.Errorf("%q: allowed %v, want %v", origin, got, want)
		}
	}
}

func TestOriginPolicyUserPatterns(t *testing.T) {
	p, err := newOriginPolicy(nil, []string{" https://app.example.com ", "https://*.example.org", "chrome-extension://*", "null", ""})
	if err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]bool{
		"https://app.example.com": true, "http://app.example.com": false, "https://app.example.com:8443": false,
		"https://a.example.org": true, "https://a.b.example.org": true, "https://a.example.org:444": false,
		"https://evil.com/.example.org": false, "https://a@evil.com#.example.org": false, "https://example.org": false,
		"https://evil.com?.example.org": false, "chrome-extension://abcdef": true, "null": true,
		"http://localhost:3000": true, // the defaults stay
	} {
		if got := p.allows(origin); got != want {
			t.Errorf("%q: allowed %v, want %v", origin, got, want)
		}
	}
	all, err := newOriginPolicy(nil, []string{"*"})
	if err != nil || !all.allows("https://anything.example") {
		t.Errorf(`"*" does not allow everyone: %v`, err)
	}
}

func TestOriginPolicyRefusesBadPatterns(t *testing.T) {
	for _, pat := range []string{
		"localhost:3000", "http://a.*.*.com", "http://example.com/path", "http://user@example.com",
		"://x", "*://example.com", "http://exa mple.com", "http://exämple.com", strings.Repeat("x", 600),
	} {
		if _, err := newOriginPolicy(nil, []string{pat}); err == nil {
			t.Errorf("pattern %q accepted", pat)
		}
	}
}

func TestOwnOrigins(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080":       "http://127.0.0.1:8080",
		"[::1]:8080":           "http://[::1]:8080",
		"[::ffff:10.0.0.1]:80": "http://10.0.0.1:80",
		"0.0.0.0:8080":         "",
		"[::]:8080":            "",
	} {
		got := ownOrigins(netip.MustParseAddrPort(addr))
		if want == "" && got != nil || want != "" && (len(got) != 2 || got[0] != want) {
			t.Errorf("%s: %v, want %q", addr, got, want)
		}
	}
}

func TestHostPolicy(t *testing.T) {
	p := newHostPolicy("Devbox.")
	for host, want := range map[string]bool{
		"": true, "localhost": true, "LOCALHOST:8080": true, "localhost.": true, "app.localhost:3000": true,
		"127.0.0.1": true, "127.0.0.1:8080": true, "127.1.2.3:80": true, "0.0.0.0:8080": true,
		"[::1]": true, "[::1]:8080": true, "[::]:8080": true, "[::ffff:127.0.0.1]:8080": true,
		"devbox": true, "DEVBOX:8080": true, "devbox.:8080": true,
		// DNS rebinding and every other name.
		"evil.example": false, "evil.example:8080": false, "localhost.evil.example": false,
		"evillocalhost": false, ".localhost": false, "devbox.evil.example": false,
		"192.168.1.5:8080": false, "[fe80::1]:8080": false, "[::2]": false, "10.0.0.1": false,
		// Malformed: bare IPv6, brackets, user info, ports, paths, unicode, long.
		"::1": false, "[::1": false, "[::1]x": false, "[::1]:": false, "[::1]:99999": false, "[127.0.0.1]": false,
		"user@localhost": false, "localhost@evil.example": false, "localhost:80:80": false, "localhost:": false,
		"localhost:-1": false, "localhost:8o": false, "localhost/x": false, ":8080": false,
		"lоcalhost": false, "localhost\x00": false, "local host": false,
		strings.Repeat("a.", 200) + "localhost": false, "127.0.0.1:" + strings.Repeat("0", 300): false,
		"0x7f.0.0.1": false, "127.1": false, "2130706433": false,
	} {
		if got := p.allows(host); got != want {
			t.Errorf("%q: allowed %v, want %v", host, got, want)
		}
	}
	if newHostPolicy("").allows("") != true || newHostPolicy("").allows("x") {
		t.Error("an unknown host name must allow no other name")
	}
}

// A page the server served calls it back with an Origin naming the Host
// it was reached at: allowed when the Host rule already vouched for the
// name, or when the name is an IP literal (no DNS rebinding points one
// elsewhere); a DNS name on a server bound beyond loopback is not.
func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		origin, host string
		hostChecked  bool
		want         bool
	}{
		{"http://192.168.1.5:11434", "192.168.1.5:11434", false, true},
		{"https://192.168.1.5:11434", "192.168.1.5:11434", false, true},
		{"http://[fd00::5]:11434", "[fd00::5]:11434", false, true},
		{"http://myhost:11434", "myhost:11434", true, true},
		{"HTTP://MyHost:11434", "myhost:11434", true, true},
		{"http://myhost:11434", "myhost:11434", false, false}, // rebinding could name any host
		{"http://192.168.1.5:11435", "192.168.1.5:11434", false, false},
		{"http://192.168.1.5", "192.168.1.5:11434", false, false},
		{"http://evil.example", "192.168.1.5:11434", true, false},
		{"ftp://192.168.1.5:11434", "192.168.1.5:11434", false, false},
		{"http://192.168.1.5:11434", "", false, false},
		{"http://192.168.1.5:99999", "192.168.1.5:99999", false, false},
		{"http://a@192.168.1.5:11434", "a@192.168.1.5:11434", true, false},
		{"http://192.168.1.5:11434\x00", "192.168.1.5:11434\x00", true, false},
		{"null", "null", true, false},
	} {
		if got := sameOrigin(c.origin, c.host, c.hostChecked); got != c.want {
			t.Errorf("sameOrigin(%q, %q, %v) = %v, want %v", c.origin, c.host, c.hostChecked, got, c.want)
		}
	}
}
