package responses

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"superfluid/session"
)

// Stored responses' chains on a session store: a response stored with a
// chain store keeps its items — the previous response's, its input, its
// output — as a conversation there, a fork of the previous response's
// (which shares its items rather than copying them), so a chain of n
// responses writes each item once and its records hold no items at all.
// Without a chain store (no data directory), or when it refuses a write,
// the record holds the whole conversation itself, as it always did.
//
// The chain store is its own session store, not the Conversations API's:
// its conversations expire with the responses (its retention is theirs)
// and no client can reach them by id.

// SetChains gives the Responses API the store its responses' chains go to.
func (st *Store) SetChains(s *session.Store) { st.chains.Store(s) }

// Chains is the chain store, nil when there is none.
func (st *Store) Chains() *session.Store { return st.chains.Load() }

// chainItems are the items of chain, in order.
func (st *Store) chainItems(chain string) ([]json.RawMessage, error) {
	cs := st.chains.Load()
	if cs == nil {
		return nil, fmt.Errorf("chain %s: %w (no chain store)", chain, session.ErrNotFound)
	}
	items, err := cs.All(chain)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(items))
	for i, it := range items {
		out[i] = it.Data
	}
	return out, nil
}

// keepChain writes job's items to a new chain and returns its id: a fork
// of the previous response's chain and the request's own input and the
// output, or, after a response whose record held its items itself, all
// of them. "" with no error: no chain store, or the response belongs to a
// conversation (which holds its items).
func (st *Store) keepChain(job *respJob) (string, error) {
	cs := st.chains.Load()
	if cs == nil || job.conv != "" {
		return "", nil
	}
	out, err := outputItems(job.obj.Output)
	if err != nil {
		return "", err
	}
	if job.prevChain == "" {
		in, err := NewItems(job.input, "input")
		if err != nil {
			return "", err
		}
		c, _, err := cs.Create(nil, SessionItems(append(in, out...)))
		return c.ID, err
	}
	in, err := NewItems(job.ownInput, "input")
	if err != nil {
		return "", err
	}
	c, err := cs.Fork(job.prevChain, "", nil)
	if err != nil {
		return "", err
	}
	if _, err := cs.Append(c.ID, SessionItems(append(in, out...))); err != nil {
		st.dropChain(c.ID)
		return "", err
	}
	return c.ID, nil
}

// dropChain deletes a deleted response's chain ("" none); the items it
// shares with other chains stay theirs.
func (st *Store) dropChain(chain string) {
	cs := st.chains.Load()
	if cs == nil || chain == "" {
		return
	}
	if err := cs.Delete(chain); err != nil {
		slog.Warn("responses: a deleted response's chain stays until it expires", "chain", chain, "err", err)
	}
}
