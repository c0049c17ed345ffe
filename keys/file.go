// Package keys is the server's API keys with their policies: which
// scheduling classes and models each key may use, how many lanes it may
// hold at once, and its requests-per-minute and tokens-per-minute limits.
// It decides (identify a key, admit a request, a lane, a model) and
// counts; the transport (package http) answers its refusals in each API's
// shape. Nothing here knows of HTTP.
package keys

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"superfluid/sched"
)

// The keys file (serve --api-keys-file, SUPERFLUID_API_KEYS) is JSON:
//
//	{"keys": [
//	  {"name": "editor", "key": "sk-editor", "classes": ["fim", "chat"],
//	   "max_lanes": 2, "requests_per_minute": 600, "tokens_per_minute": 200000,
//	   "models": ["qwen2.5-coder"]},
//	  {"name": "agents", "sha256": "<hex of sha256(key)>", "classes": ["agent", "background"]}
//	]}
//
// JSON rather than YAML or TOML: the standard library reads it, and it
// refuses what it does not know (every unknown member is an error).

// entry is one key as the file writes it.
type entry struct {
	Name    string   `json:"name"`
	Key     string   `json:"key"`
	SHA256  string   `json:"sha256"`
	Classes []string `json:"classes"`
	// The limits: 0 or absent is no limit.
	MaxLanes          int64    `json:"max_lanes"`
	RequestsPerMinute int64    `json:"requests_per_minute"`
	TokensPerMinute   int64    `json:"tokens_per_minute"`
	Models            []string `json:"models"`
}

type file struct {
	Keys []entry `json:"keys"`
}

// Policy is what one key may do.
type Policy struct {
	// Name is what logs and /metrics call the key (never the key itself).
	Name   string
	digest [sha256.Size]byte
	// Classes are the scheduling classes the key may use.
	Classes [sched.NumClasses]bool
	// MaxLanes bounds the lanes (generations, one per choice) the key
	// holds at once; 0: no bound.
	MaxLanes int
	// RequestsPerMinute and TokensPerMinute are the rate limits; 0: none.
	RequestsPerMinute, TokensPerMinute int
	// Models are the names the key may ask for; nil: any.
	Models []string
}

// Restricted reports whether the policy holds its key to anything: a
// class left out, a model list, a limit.
func (p *Policy) Restricted() bool {
	for _, ok := range p.Classes {
		if !ok {
			return true
		}
	}
	return p.Models != nil || p.MaxLanes > 0 || p.RequestsPerMinute > 0 || p.TokensPerMinute > 0
}

// Limits on what a file may hold: a hostile or mistaken file is refused
// whole, never half-applied.
const (
	maxFileBytes = 1 << 20
	maxKeys      = 10_000
	maxNameLen   = 64
	maxKeyLen    = 4096
	maxModels    = 1000
	// maxRate bounds every numeric limit: far past any machine's rate, so
	// the token-bucket arithmetic stays exact in float64.
	maxRate = 1_000_000_000
)

// ReservedName is the name of the --api-key key, which has no limits; a
// file may not use it.
const ReservedName = "api-key"

// Parse reads a keys file's JSON.
func Parse(data []byte) ([]*Policy, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("keys: the file is %d bytes, over the limit of %d", len(data), maxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("keys: text after the JSON object")
	}
	if len(f.Keys) == 0 {
		return nil, errors.New(`keys: no keys (the file holds {"keys": [...]})`)
	}
	if len(f.Keys) > maxKeys {
		return nil, fmt.Errorf("keys: %d keys, over the limit of %d", len(f.Keys), maxKeys)
	}
	out := make([]*Policy, 0, len(f.Keys))
	names := map[string]bool{}
	digests := map[[sha256.Size]byte]string{}
	for i, e := range f.Keys {
		p, err := e.policy()
		if err != nil {
			return nil, fmt.Errorf("keys: key %d (%s): %w", i, quoteName(e.Name), err)
		}
		if names[p.Name] {
			return nil, fmt.Errorf("keys: the name %q is used twice", p.Name)
		}
		if other, dup := digests[p.digest]; dup {
			return nil, fmt.Errorf("keys: %q and %q are the same key", other, p.Name)
		}
		names[p.Name], digests[p.digest] = true, p.Name
		out = append(out, p)
	}
	return out, nil
}

// policy checks one entry and turns it into a Policy.
func (e *entry) policy() (*Policy, error) {
	if err := checkName(e.Name); err != nil {
		return nil, err
	}
	p := &Policy{Name: e.Name}
	switch {
	case e.Key != "" && e.SHA256 != "":
		return nil, errors.New(`give "key" or "sha256", not both`)
	case e.Key != "":
		if err := checkKey(e.Key); err != nil {
			return nil, err
		}
		p.digest = sha256.Sum256([]byte(e.Key))
	case e.SHA256 != "":
		b, err := hex.DecodeString(e.SHA256)
		if err != nil || len(b) != sha256.Size {
			return nil, errors.New(`"sha256" must be 64 hex digits (sha256sum of the key)`)
		}
		copy(p.digest[:], b)
	default:
		return nil, errors.New(`no "key" or "sha256"`)
	}
	if err := p.readClasses(e.Classes); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		field string
		v     int64
		dst   *int
	}{{"max_lanes", e.MaxLanes, &p.MaxLanes}, {"requests_per_minute", e.RequestsPerMinute, &p.RequestsPerMinute}, {"tokens_per_minute", e.TokensPerMinute, &p.TokensPerMinute}} {
		if l.v < 0 || l.v > maxRate {
			return nil, fmt.Errorf("%q must be 0 (no limit) to %d, got %d", l.field, maxRate, l.v)
		}
		*l.dst = int(l.v)
	}
	if e.Models != nil {
		if len(e.Models) == 0 {
			return nil, errors.New(`"models" is empty: omit it to allow every model`)
		}
		if len(e.Models) > maxModels {
			return nil, fmt.Errorf(`"models" names %d models, over the limit of %d`, len(e.Models), maxModels)
		}
		for _, m := range e.Models {
			if strings.TrimSpace(m) == "" || len(m) > maxKeyLen {
				return nil, fmt.Errorf(`"models" holds an empty or overlong name`)
			}
		}
		p.Models = e.Models
	}
	return p, nil
}

// readClasses reads the classes a key may use: every class when absent.
func (p *Policy) readClasses(names []string) error {
	if names == nil {
		for c := range p.Classes {
			p.Classes[c] = true
		}
		return nil
	}
	if len(names) == 0 {
		return errors.New(`"classes" is empty: omit it to allow every class`)
	}
	for _, n := range names {
		c, err := sched.ParseClass(n)
		if err != nil {
			return fmt.Errorf(`"classes": %w`, err)
		}
		p.Classes[c] = true
	}
	return nil
}

// checkName keeps a name fit for a log field and a metric label.
func checkName(name string) error {
	if name == "" {
		return errors.New(`no "name"`)
	}
	if len(name) > maxNameLen {
		return fmt.Errorf(`"name" is over %d bytes`, maxNameLen)
	}
	if name == ReservedName {
		return fmt.Errorf(`the name %q is the --api-key key's`, ReservedName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf(`"name" may hold letters, digits, '-', '_' and '.' only`)
		}
	}
	return nil
}

// checkKey refuses a key no client could send: a header value trimmed of
// spaces, printable ASCII.
func checkKey(key string) error {
	if len(key) > maxKeyLen {
		return fmt.Errorf(`"key" is over %d bytes`, maxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return errors.New(`"key" may hold printable ASCII without spaces only`)
		}
	}
	return nil
}

// quoteName is a name as an error quotes it, however long the file made it.
func quoteName(name string) string {
	if len(name) > maxNameLen {
		name = name[:maxNameLen] + "…"
	}
	return fmt.Sprintf("%q", name)
}

// Source is where the keys come from: a file's path, or the JSON itself
// (a value whose first non-space byte is '{', as SUPERFLUID_API_KEYS may
// hold it).
type Source string

// inline reports whether the source is the JSON itself.
func (s Source) inline() bool { return strings.HasPrefix(strings.TrimSpace(string(s)), "{") }

// String names the source for logs without printing inline keys.
func (s Source) String() string {
	if s.inline() {
		return "inline JSON"
	}
	return string(s)
}

// read loads the source's policies.
func (s Source) read() ([]*Policy, error) {
	if s.inline() {
		return Parse([]byte(s))
	}
	f, err := os.Open(string(s))
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("keys: reading %s: %w", s, err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, s)
	}
	return p, nil
}
