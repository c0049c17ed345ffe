package pull

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Options configure Pull.
type Options struct {
	// Dir is the models directory; it is created if missing.
	Dir string
	// Name is the local name (default: the remote file's name); .gguf is
	// added when missing.
	Name string
	// SHA256 is the expected digest in hex; it overrides what the server
	// announces.
	SHA256 string
	// Client makes the requests (nil: a client honouring the proxy
	// environment). Its CheckRedirect is replaced.
	Client *http.Client
	// OnProgress, when set, is called as bytes arrive.
	OnProgress func(Progress)
	// Retries bounds the attempts after a transient failure (a dropped
	// connection, a 5xx) that brought no new bytes (0: 4).
	Retries int
	// RetryWait is the first pause between attempts, doubling up to 30s
	// (0: 1s).
	RetryWait time.Duration
	// StallTimeout retries an attempt that receives nothing this long
	// (0: 60s).
	StallTimeout time.Duration
	// MaxBytes bounds the file pulled (≤ 0: no bound). A file announced
	// larger is refused before a byte is written; one of unknown size
	// fails as it grows past the bound. Either way the partial file is
	// removed: resuming it under the same bound would only fail again,
	// and bytes past it were never wanted on this disk.
	MaxBytes int64
}

// Progress is a download's state, reported to Options.OnProgress.
type Progress struct {
	Name  string
	Stage Stage
	Done  int64 // bytes on disk
	Total int64 // the file's size, -1 while unknown
	Start int64 // bytes already on disk when this pull began (resumed)
	// SHA256 is the digest the file must have (hex), "" while unknown:
	// a plain URL without --sha256 is known only once complete.
	SHA256 string
}

// Stage is what a download is doing when it reports.
type Stage int

const (
	// Downloading: bytes are arriving (Done of Total).
	Downloading Stage = iota
	// Verifying: the complete file's size, digest and header are checked.
	Verifying
	// Saving: the manifest is written and the file takes its name.
	Saving
)

// Result says what Pull did.
type Result struct {
	Name   string // the model's name: its file name without .gguf
	Path   string
	Source string // hf.co/ORG/REPO:FILE or the URL
	Size   int64
	SHA256 string
	// UpToDate means the model was already there and the server (when it
	// could be asked) has nothing newer: nothing was downloaded.
	UpToDate bool
	Resumed  int64 // bytes of an earlier partial download kept
	Elapsed  time.Duration
	// Note is a remark for the user, e.g. that the server could not be
	// asked whether an up-to-date model changed.
	Note string
}

// remoteMeta is what the server says about a file before it is fetched.
type remoteMeta struct {
	size   int64  // -1: unknown
	sha256 string // hex, when the server names it (Hugging Face LFS files)
	etag   string // the version's identity for the up-to-date check
}

// partialState is NAME.gguf.partial.json: where the partial bytes came
// from, so a resume never splices two versions of a file.
type partialState struct {
	Source    string `json:"source"`
	URL       string `json:"url"`
	Validator string `json:"validator,omitempty"` // strong ETag or Last-Modified, sent as If-Range
	ETag      string `json:"etag,omitempty"`
	Size      int64  `json:"size"`             // expected, -1 unknown
	SHA256    string `json:"sha256,omitempty"` // announced by the server
}

// transientError is a failure worth retrying: a dropped connection, a
// stalled transfer, a 5xx.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

func transient(err error) error { return transientError{err} }

func isTransient(err error) bool {
	var t transientError
	return errors.As(err, &t)
}

type puller struct {
	opts         Options
	client       *http.Client // follows redirects, Authorization only to the endpoint's host
	noFollow     *http.Client // for Hugging Face's HEAD, whose first answer carries the file's facts
	endpoint     string
	endpointHost string
	token        string
	stall        time.Duration
}

func newPuller(opts Options) *puller {
	p := &puller{opts: opts, endpoint: Endpoint(), token: os.Getenv("HF_TOKEN"), stall: opts.StallTimeout}
	if u, err := url.Parse(p.endpoint); err == nil {
		p.endpointHost = strings.ToLower(u.Host)
	}
	if p.opts.Retries <= 0 {
		p.opts.Retries = 4
	}
	if p.opts.RetryWait <= 0 {
		p.opts.RetryWait = time.Second
	}
	if p.stall <= 0 {
		p.stall = time.Minute
	}
	base := http.Client{}
	if opts.Client != nil {
		base = *opts.Client
	}
	follow, noFollow := base, base
	follow.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if !p.isEndpoint(req.URL) {
			req.Header.Del("Authorization")
		}
		return nil
	}
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p.client, p.noFollow = &follow, &noFollow
	return p
}

func (p *puller) isEndpoint(u *url.URL) bool {
	return p.endpointHost != "" && strings.EqualFold(u.Host, p.endpointHost)
}

// request builds a request carrying $HF_TOKEN when it goes to the Hugging
// Face endpoint, and to nowhere else.
func (p *puller) request(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if p.token != "" && p.isEndpoint(req.URL) {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	req.Header.Set("User-Agent", "superfluid")
	return req, nil
}

// Pull downloads the GGUF file ref names into opts.Dir (see the package
// documentation). Pulling a model that is already there and unchanged on
// the server downloads nothing. When ctx ends, the partial file stays for
// the next Pull to resume, and the error wraps ctx's.
func Pull(ctx context.Context, refArg string, opts Options) (*Result, error) {
	start := time.Now()
	ref, err := ParseRef(refArg)
	if err != nil {
		return nil, err
	}
	want, err := normalizeSHA(opts.SHA256)
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("pull: no models directory")
	}
	p := newPuller(opts)
	requested := ref.String()
	if ref.IsHF() && (ref.File == "" || ref.IsTag()) {
		var files []string
		err := p.retry(ctx, func() (err error) {
			files, err = p.listRepo(ctx, ref)
			return err
		})
		if err != nil {
			return nil, err
		}
		if ref.File, err = ref.pickFile(files); err != nil {
			return nil, err
		}
	}
	source, u := ref.String(), ref.downloadURL(p.endpoint)
	name, err := localName(opts.Name, ref)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	final := filepath.Join(opts.Dir, name)
	res := &Result{Name: strings.TrimSuffix(name, Ext), Path: final, Source: source}

	var meta remoteMeta
	if fi, err := os.Stat(final); err == nil {
		m, err := readManifest(final)
		if err != nil {
			return nil, fmt.Errorf("pull: %s already exists and was not pulled by superfluid; pass --name to pull %s under another name", final, source)
		}
		if m.Source != source {
			return nil, fmt.Errorf("pull: %s already holds %s; pass --name to pull %s under another name", res.Name, m.Source, source)
		}
		meta, err = p.remoteMeta(ctx, ref, u)
		if err != nil {
			meta = remoteMeta{size: -1}
		}
		if err != nil && fi.Size() == m.Size {
			res.Size, res.SHA256, res.UpToDate, res.Elapsed = m.Size, m.SHA256, true, time.Since(start)
			res.Note = "not checked against the server: " + err.Error()
			return res, nil
		}
		if err == nil && fi.Size() == m.Size && !changed(m, meta, want) {
			res.Size, res.SHA256, res.UpToDate, res.Elapsed = m.Size, m.SHA256, true, time.Since(start)
			return res, nil
		}
		// Changed on the server or damaged here: download again; the old
		// file stays until the new one is verified.
	} else if ref.IsHF() {
		if err := p.retry(ctx, func() (err error) {
			meta, err = p.headHF(ctx, u)
			return err
		}); err != nil {
			return nil, err
		}
	} else {
		meta = remoteMeta{size: -1}
	}
	if want == "" {
		want = meta.sha256
	}
	d := &download{p: p, ref: requested, source: source, url: u, name: name, final: final, want: want, meta: meta}
	if err := d.run(ctx); err != nil {
		return nil, err
	}
	res.Size, res.SHA256, res.Resumed, res.Elapsed = d.have, d.sum, d.resumed, time.Since(start)
	return res, nil
}

// changed reports whether the server's facts (or the digest the user
// expects) contradict the manifest of the model on disk.
func changed(m *manifest, meta remoteMeta, want string) bool {
	return (want != "" && want != m.SHA256) ||
		(meta.sha256 != "" && meta.sha256 != m.SHA256) ||
		(meta.size >= 0 && meta.size != m.Size) ||
		(meta.etag != "" && m.ETag != "" && meta.etag != m.ETag)
}

// remoteMeta asks the server about a file without downloading it.
func (p *puller) remoteMeta(ctx context.Context, ref Ref, u string) (remoteMeta, error) {
	if ref.IsHF() {
		return p.headHF(ctx, u)
	}
	req, err := p.request(ctx, http.MethodHead, u)
	if err != nil {
		return remoteMeta{}, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return remoteMeta{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return remoteMeta{}, statusError(resp, u, false)
	}
	return remoteMeta{size: resp.ContentLength, etag: unquoteETag(resp.Header.Get("ETag"))}, nil
}

// headHF asks Hugging Face for a file's size and sha256: its resolve URL
// answers a HEAD (redirect not followed) with X-Linked-Size and
// X-Linked-Etag for files in LFS storage, which GGUF files are. A
// redirect within the Hub (a renamed repository) is followed.
func (p *puller) headHF(ctx context.Context, u string) (remoteMeta, error) {
	for hop := 0; hop < 5; hop++ {
		req, err := p.request(ctx, http.MethodHead, u)
		if err != nil {
			return remoteMeta{}, err
		}
		resp, err := p.noFollow.Do(req)
		if err != nil {
			return remoteMeta{}, transportError(err)
		}
		resp.Body.Close()
		m := remoteMeta{size: -1}
		if n, err := strconv.ParseInt(resp.Header.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
			m.size = n
		}
		if tag := unquoteETag(resp.Header.Get("X-Linked-Etag")); tag != "" {
			m.etag = tag
			if isSHA256(tag) {
				m.sha256 = strings.ToLower(tag)
			}
		}
		switch code := resp.StatusCode; {
		case code >= 300 && code < 400:
			if m.size >= 0 || m.etag != "" {
				return m, nil
			}
			loc, err := resp.Location()
			if err != nil || !p.isEndpoint(loc) {
				return m, nil // off to storage without the facts: learn the size from the download
			}
			u = loc.String()
		case code == http.StatusOK:
			if m.size < 0 {
				m.size = resp.ContentLength
			}
			if m.etag == "" {
				m.etag = unquoteETag(resp.Header.Get("ETag"))
			}
			return m, nil
		default:
			return m, statusError(resp, u, true)
		}
	}
	return remoteMeta{}, fmt.Errorf("pull: %s: too many redirects", u)
}

// listRepo returns the file names of a Hugging Face repository.
func (p *puller) listRepo(ctx context.Context, ref Ref) ([]string, error) {
	api := p.endpoint + "/api/models/" + escapePath(ref.Repo)
	if ref.Revision != "" && ref.Revision != "main" {
		api += "/revision/" + url.PathEscape(ref.Revision)
	}
	req, err := p.request(ctx, http.MethodGet, api)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, "hf.co/"+ref.Repo, true)
	}
	var info struct {
		Siblings []struct {
			RFilename string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return nil, transient(fmt.Errorf("pull: hf.co/%s: reading the file list: %w", ref.Repo, err))
	}
	files := make([]string, len(info.Siblings))
	for i, s := range info.Siblings {
		files[i] = s.RFilename
	}
	return files, nil
}

// retry runs f until it succeeds, fails for good, or has failed
// transiently Retries+1 times.
func (p *puller) retry(ctx context.Context, f func() error) error {
	for tries := 1; ; tries++ {
		err := f()
		if err == nil || !isTransient(err) || ctx.Err() != nil || tries > p.opts.Retries {
			if ctx.Err() != nil {
				return &interruptedError{"pull: interrupted", ctx.Err()}
			}
			return err
		}
		if err := p.wait(ctx, tries); err != nil {
			return &interruptedError{"pull: interrupted", err}
		}
	}
}

// wait pauses before attempt tries+1: RetryWait, doubling, at most 30s.
func (p *puller) wait(ctx context.Context, tries int) error {
	d := p.opts.RetryWait << min(tries-1, 10)
	d = min(d, 30*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// transportError classifies a failed request: a refused or reset
// connection may pass, an unknown host or a bad certificate will not.
func transportError(err error) error {
	var dnsErr *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var badCert x509.CertificateInvalidError
	var badHost x509.HostnameError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound,
		errors.As(err, &unknownCA), errors.As(err, &badCert), errors.As(err, &badHost):
		return fmt.Errorf("pull: %w", err)
	}
	return transient(fmt.Errorf("pull: %w", err))
}

// statusError describes an HTTP failure; 408, 429 and 5xx are transient.
func statusError(resp *http.Response, what string, hf bool) error {
	msg := fmt.Sprintf("pull: %s: %s", what, resp.Status)
	if m := resp.Header.Get("X-Error-Message"); m != "" {
		msg += " (" + m + ")"
	}
	switch code := resp.StatusCode; {
	case hf && (code == http.StatusUnauthorized || code == http.StatusForbidden) && os.Getenv("HF_TOKEN") == "":
		msg += "; a gated or private repository needs HF_TOKEN set to a Hugging Face access token"
	case hf && code == http.StatusNotFound:
		msg += "; no such repository or file (private ones need HF_TOKEN)"
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return transient(errors.New(msg))
	}
	return errors.New(msg)
}

func normalizeSHA(s string) (string, error) {
	s = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "sha256:"))
	if s != "" && !isSHA256(s) {
		return "", fmt.Errorf("pull: --sha256 %q is not 64 hex digits", s)
	}
	return s, nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func unquoteETag(s string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(s), "W/"), `"`)
}

// localName is --name (with .gguf added) or the remote file's name.
func localName(name string, ref Ref) (string, error) {
	flag := name != ""
	if !flag {
		name = ref.baseName()
	}
	if !strings.HasSuffix(strings.ToLower(name), Ext) {
		name += Ext
	}
	if base := strings.TrimSuffix(name, Ext); base == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, `/\`) {
		if flag {
			return "", fmt.Errorf("pull: --name %q: want a plain file name", name)
		}
		return "", fmt.Errorf("pull: %s names no file; pass --name", ref)
	}
	return name, nil
}
