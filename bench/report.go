package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Report is a run's result, printed as JSON. Fields that were not measured
// (a server that reports no cached tokens, an unstreamed answer's TTFT) are
// absent rather than zero.
type Report struct {
	Scenario    Scenario  `json:"scenario"`
	URL         string    `json:"url"`
	API         API       `json:"api"`
	Model       string    `json:"model"`
	Endpoint    string    `json:"endpoint"`
	Settings    Settings  `json:"settings"`
	Started     time.Time `json:"started"`
	ElapsedS    float64   `json:"elapsed_s"`
	Interrupted bool      `json:"interrupted,omitempty"`
	Phase
	// TokensPerS is the aggregate decode rate: every stream's tokens after
	// its first ÷ the span from the first first-token to the last token.
	TokensPerS *float64 `json:"tokens_per_s,omitempty"`
	// StreamTokensPerS is each request's decode rate (tokens after the
	// first ÷ time after the first).
	StreamTokensPerS *Summary         `json:"stream_tokens_per_s,omitempty"`
	Key              *Key             `json:"key,omitempty"`
	FIM              *FIMReport       `json:"fim,omitempty"`
	MultiTurn        *MultiTurnReport `json:"multi_turn,omitempty"`
	Diverge          *DivergeReport   `json:"diverge,omitempty"`
	Soak             *SoakReport      `json:"soak,omitempty"`
	// Failures counts the run's failed requests (every phase, background
	// load included) and names the first; any failure makes Key.Met false,
	// since the figures leave failed requests out.
	Failures *Failures `json:"failures,omitempty"`
	Errors   []string  `json:"errors,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
}

// Settings are the run's resolved parameters.
type Settings struct {
	Concurrency     int     `json:"concurrency"`
	Requests        int     `json:"requests"`
	Turns           int     `json:"turns,omitempty"`
	MaxTokens       int     `json:"max_tokens"`
	PromptTokens    int     `json:"prompt_tokens"`
	FIMPromptTokens int     `json:"fim_prompt_tokens,omitempty"`
	DurationS       float64 `json:"duration_s,omitempty"`
	TimeoutS        float64 `json:"timeout_s"`
	Seed            uint64  `json:"seed"`
	Prompt          sizer   `json:"prompt_sizing"`
}

// Phase is a set of measured requests.
type Phase struct {
	Requests          Counts   `json:"requests"`
	TTFTMs            *Summary `json:"ttft_ms,omitempty"`
	LatencyMs         *Summary `json:"latency_ms,omitempty"`
	PromptTokens      *Summary `json:"prompt_tokens,omitempty"`
	CachedTokens      *Summary `json:"cached_tokens,omitempty"`
	CompletionTokens  int      `json:"completion_tokens"`
	CachedPromptShare *float64 `json:"cached_prompt_share,omitempty"`
}

// Counts splits requests by how they ended; cancelled ones were stopped by
// the run itself (Ctrl-C, the end of the FIM load), not failed by the server.
type Counts struct {
	OK        int `json:"ok"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled,omitempty"`
}

// Key is the scenario's headline figure and the design notes' target for it.
type Key struct {
	Name   string   `json:"name"`
	Value  float64  `json:"value"`
	Target *float64 `json:"target,omitempty"`
	// Better is "lower" or "higher"; Met is set when there is a target.
	Better string `json:"better,omitempty"`
	Met    *bool  `json:"met,omitempty"`
}

func newKey(name string, value float64, target float64, better string) *Key {
	k := &Key{Name: name, Value: round3(value), Better: better}
	if target > 0 {
		k.Target = ptr(target)
		k.Met = ptr(value <= target)
		if better == "higher" {
			k.Met = ptr(value >= target)
		}
	}
	return k
}

// Failures is how many requests failed and the first failure's message.
type Failures struct {
	Count      int    `json:"count"`
	FirstError string `json:"first_error"`
}

// errorLog gathers a run's failures: distinct messages with their counts,
// and the one that happened first. It is safe for concurrent use.
type errorLog struct {
	mu      sync.Mutex
	counts  map[string]int
	total   int
	first   string
	firstAt time.Time
}

func newErrorLog() *errorLog { return &errorLog{counts: map[string]int{}} }

// add records a failure that happened at at. A nil log records nothing
// (a breakdown whose failures the run's log already holds).
func (l *errorLog) add(at time.Time, err error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := err.Error()
	l.counts[msg]++
	l.total++
	if l.first == "" || at.Before(l.firstAt) {
		l.first, l.firstAt = msg, at
	}
}

// failures is the count and first failure, or nil when none failed.
func (l *errorLog) failures() *Failures {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total == 0 {
		return nil
	}
	return &Failures{Count: l.total, FirstError: l.first}
}

// list is the most frequent messages first, at most five.
func (l *errorLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	msgs := make([]string, 0, len(l.counts))
	for m := range l.counts {
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(i, j int) bool {
		if l.counts[msgs[i]] != l.counts[msgs[j]] {
			return l.counts[msgs[i]] > l.counts[msgs[j]]
		}
		return msgs[i] < msgs[j]
	})
	if len(msgs) > 5 {
		msgs = msgs[:5]
	}
	for i, m := range msgs {
		msgs[i] = fmt.Sprintf("%d× %s", l.counts[m], m)
	}
	return msgs
}

// tally summarises outcomes. A request that failed because stopped (its
// context, as cancelled reports) counts as cancelled; failures go to errs
// (nil: a breakdown of requests another tally records).
func tally(outs []outcome, stopped context.Context, errs *errorLog) Phase {
	var p Phase
	var ttft, lat, prompt, cached []float64
	promptSum, cachedSum := 0, 0
	for i := range outs {
		o := &outs[i]
		if o.Err != nil {
			if stopped.Err() != nil && errors.Is(o.Err, context.Canceled) {
				p.Requests.Cancelled++
				continue
			}
			p.Requests.Failed++
			errs.add(o.done, o.Err)
			continue
		}
		p.Requests.OK++
		if d, ok := o.ttft(); ok {
			ttft = append(ttft, ms(d))
		}
		lat = append(lat, ms(o.latency()))
		p.CompletionTokens += o.tokens()
		if o.prompt >= 0 {
			prompt = append(prompt, float64(o.prompt))
		}
		if o.cached >= 0 && o.prompt > 0 {
			cached = append(cached, float64(o.cached))
			promptSum += o.prompt
			cachedSum += o.cached
		}
	}
	p.TTFTMs, p.LatencyMs = Summarize(ttft), Summarize(lat)
	p.PromptTokens, p.CachedTokens = Summarize(prompt), Summarize(cached)
	if promptSum > 0 {
		p.CachedPromptShare = ptr(round3(float64(cachedSum) / float64(promptSum)))
	}
	return p
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ColdTTFT reads an earlier multi-turn report and returns its turn-1 p50
// TTFT: the cold baseline a run after a server restart is compared with.
func ColdTTFT(r io.Reader) (time.Duration, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return 0, fmt.Errorf("bench: reading the cold report: %w", err)
	}
	if rep.MultiTurn == nil || len(rep.MultiTurn.Turns) == 0 || rep.MultiTurn.Turns[0].TTFTMs == nil {
		return 0, errors.New("bench: the cold report is not a multi-turn report with a measured turn 1")
	}
	return time.Duration(rep.MultiTurn.Turns[0].TTFTMs.P50 * float64(time.Millisecond)), nil
}

// Verdict is the run's outcome for the process's exit status: nil for an
// interrupted run (it reports what it measured) or one without a problem,
// else what went wrong: no measured request succeeded, some failed, or a
// soak found problems.
func (rep *Report) Verdict() error {
	switch {
	case rep.Interrupted:
	case rep.Requests.OK == 0:
		return errors.New("bench: no measured request succeeded" + rep.Failures.firstError())
	case rep.Failures != nil:
		return fmt.Errorf("bench: %d requests failed%s", rep.Failures.Count, rep.Failures.firstError())
	case rep.Soak != nil && len(rep.Soak.Problems) > 0:
		return fmt.Errorf("bench: soak: %s", strings.Join(rep.Soak.Problems, "; "))
	}
	return nil
}

// firstError is the verdict's note of the first failure, if there was one.
func (f *Failures) firstError() string {
	if f == nil {
		return ""
	}
	return " (first: " + f.FirstError + ")"
}
