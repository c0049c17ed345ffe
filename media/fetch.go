package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Remote media: an image a request names by an http(s) URL, fetched only
// when the server was started with --allow-remote-media. A URL comes from
// the request, so from whoever can write into a prompt (a page an agent
// read, a document a RAG pipeline pasted): the fetch is bounded in every
// way it can be — scheme, time, bytes (counted while reading, never after),
// redirects, parallelism — and what it returns is judged by its bytes
// alone (Check), never by the Content-Type the server claims.

// Remote is one image a request names by URL: images[Index] is filled by
// Fetcher.FetchAll. Field is the request field a refusal names (the
// API's param) and At where in the request the URL was.
type Remote struct {
	Index int
	URL   string
	Field string
	At    string
}

// FetchError is a remote image that could not be had, and why, in words a
// client can act on.
type FetchError struct {
	Remote Remote
	Reason string
}

func (e *FetchError) Error() string {
	return fmt.Sprintf("%s: fetching %s: %s", e.Remote.At, shortURL(e.Remote.URL), e.Reason)
}

// shortURL is u cut to a length an error message can carry.
func shortURL(u string) string {
	const most = 200
	if len(u) <= most {
		return u
	}
	return u[:most] + "…"
}

// Fetch limits.
const (
	// FetchTimeout bounds one image's whole fetch: connecting, redirects
	// and reading the body. A request's fetches together take at most
	// three times as long (32 slow images would otherwise hold it for
	// minutes).
	FetchTimeout = 20 * time.Second
	// MaxRedirects is how many redirects one fetch follows.
	MaxRedirects = 3
	// FetchParallel is how many images of one request are fetched at once.
	FetchParallel = 4
	// MaxFetchTotal bounds the bytes all of one request's fetches read
	// together (each is bounded by the inline limit as well).
	MaxFetchTotal = 64 << 20
)

// Fetcher fetches requests' remote images. Any goroutine may use it.
type Fetcher struct {
	client   *http.Client
	maxBytes int
	total    int
	timeout  time.Duration
}

// FetcherOptions configure a Fetcher; zero fields take the constants above.
type FetcherOptions struct {
	// MaxBytes is one image's byte limit (the inline limit).
	MaxBytes int
	Timeout  time.Duration
	// MaxTotal is one request's byte limit over all its images.
	MaxTotal int
}

// NewFetcher returns a fetcher. Its connections refuse link-local and
// unspecified addresses (169.254.169.254 is a cloud's metadata service),
// checked on the address dialled, so a name that resolves there — or
// re-resolves there after a check — is refused too; loopback and private
// networks stay reachable (the server is local, and so are the user's
// image hosts). It uses no proxy from the environment.
func NewFetcher(o FetcherOptions) *Fetcher {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 20 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = FetchTimeout
	}
	if o.MaxTotal <= 0 {
		o.MaxTotal = MaxFetchTotal
	}
	dialer := &net.Dialer{Timeout: o.Timeout, Control: refuseAddress}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost:   FetchParallel,
		IdleConnTimeout:       30 * time.Second,
	}
	client := &http.Client{
		Transport: transport,
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("more than %d redirects", MaxRedirects)
			}
			if s := req.URL.Scheme; s != "http" && s != "https" {
				return fmt.Errorf("a redirect to a %s: URL (http and https only)", s)
			}
			return nil
		},
	}
	return &Fetcher{client: client, maxBytes: o.MaxBytes, total: o.MaxTotal, timeout: o.Timeout}
}

// refuseAddress refuses a connection to an address no image is served
// from and a cloud's credentials are: link-local, unspecified, multicast.
func refuseAddress(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("not an IP address: %q", host)
	}
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() {
		return fmt.Errorf("address %s is link-local, unspecified or multicast: not fetched", ip)
	}
	return nil
}

// CheckURL refuses a URL the fetcher would not fetch: not http or https,
// no host, or credentials in it.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return refuse("not a URL: %v", err)
	}
	if u.Scheme == "" {
		return refuse("not an absolute URL (http or https)")
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return refuse("a %s: URL is not fetched (http and https only)", u.Scheme)
	}
	if u.Host == "" {
		return refuse("a URL without a host")
	}
	if u.User != nil {
		return refuse("a URL with credentials is not fetched")
	}
	return nil
}

// errFetchBudget ends a request's fetches that ran past their time
// together.
var errFetchBudget = errors.New("the request's remote images took too long together")

// FetchAll fetches the remote images into images, at most FetchParallel
// at a time, under ctx (a client that hangs up ends them), within three
// fetch timeouts together. The first failure ends the others and is
// returned as a *FetchError.
func (f *Fetcher) FetchAll(ctx context.Context, images [][]byte, remote []Remote) error {
	for _, r := range remote {
		if r.Index < 0 || r.Index >= len(images) {
			return &FetchError{Remote: r, Reason: "no place among the request's images (a server bug)"}
		}
	}
	ctx, stop := context.WithTimeoutCause(ctx, 3*f.timeout, errFetchBudget)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		budget   atomic.Int64
	)
	budget.Store(int64(f.total))
	slots := make(chan struct{}, FetchParallel)
	for _, r := range remote {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			b, err := f.fetch(ctx, r.URL, &budget)
			if err != nil {
				once.Do(func() {
					firstErr = &FetchError{Remote: r, Reason: err.Error()}
					cancel()
				})
				return
			}
			images[r.Index] = b
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if ctx.Err() != nil {
		return context.Cause(ctx) // ended before every fetch began
	}
	return nil
}

// fetch reads one image: a 2xx answer of at most maxBytes (and what is
// left of the request's budget), whose bytes pass Check.
func (f *Fetcher) fetch(ctx context.Context, raw string, budget *atomic.Int64) ([]byte, error) {
	if err := CheckURL(raw); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	req.Header.Set("Accept", "image/png, image/jpeg, image/gif, image/bmp")
	req.Header.Set("User-Agent", "superfluid (remote media)")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.reason(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("the server answered %s", resp.Status)
	}
	if resp.ContentLength > int64(f.maxBytes) {
		return nil, fmt.Errorf("%d bytes: an image may be at most %d", resp.ContentLength, f.maxBytes)
	}
	// Read no further than the limit or what the request's budget has left.
	limit := min(int64(f.maxBytes), max(0, budget.Load()))
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, f.reason(ctx, err)
	}
	if len(b) > f.maxBytes {
		return nil, fmt.Errorf("more than %d bytes: an image may be at most %d", f.maxBytes, f.maxBytes)
	}
	if budget.Add(-int64(len(b))) < 0 {
		return nil, fmt.Errorf("the request's remote images pass %d bytes together", f.total)
	}
	if _, err := Check(b); err != nil {
		return nil, err
	}
	return b, nil
}

// reason says why a fetch failed, the timeout and the request's end told
// apart from the network's errors.
func (f *Fetcher) reason(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case errors.Is(context.Cause(ctx), errFetchBudget):
		return fmt.Errorf("%w (%s)", errFetchBudget, 3*f.timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("the request ended: %w", ctx.Err())
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("no answer within %s", f.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
