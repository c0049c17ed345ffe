package responses

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"superfluid/batches"
	"superfluid/http/wire"
	"superfluid/respstore"
	"superfluid/session"
)

// Store is what the Responses API keeps: its stored responses — the
// store the app opened under --data-dir (Set), else, at first use, one in
// memory — and the conversations (the Conversations API's, which a
// response continues by its conversation parameter), which need the data
// directory: the session store is a log on disk (SetSessions).
type Store struct {
	ptr      atomic.Pointer[respstore.Store]
	once     sync.Once
	sessions atomic.Pointer[session.Store]
	chains   atomic.Pointer[session.Store] // the stored responses' chains (chains.go)
	files    atomic.Pointer[batches.Store] // the files input_image's file_id names (images.go)

	// busy are the conversations a turn is running in: a second turn
	// would read the conversation without the first's items and append
	// its own among them.
	busyMu sync.Mutex
	busy   map[string]bool
}

// Set gives the Responses API its store of responses.
func (st *Store) Set(s *respstore.Store) { st.ptr.Store(s) }

// SetSessions gives the Responses and Conversations APIs their store of
// conversations.
func (st *Store) SetSessions(s *session.Store) { st.sessions.Store(s) }

// SetFiles gives the Responses API the server's files (/v1/files), which
// an input_image names by file_id.
func (st *Store) SetFiles(s *batches.Store) { st.files.Store(s) }

// get is the store the app set, else one in memory.
func (st *Store) get() *respstore.Store {
	st.once.Do(func() {
		mem, _ := respstore.Open("", respstore.Options{}) // a memory store cannot fail to open
		st.ptr.CompareAndSwap(nil, mem)
	})
	return st.ptr.Load()
}

// Sessions is the conversation store the app set, or the error that
// says there is none.
func (st *Store) Sessions() (*session.Store, error) {
	if ss := st.sessions.Load(); ss != nil {
		return ss, nil
	}
	return nil, &wire.Error{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Code: "conversations_off",
		Msg: "conversations are off: this server has no data directory (start it with --data-dir)"}
}

// SessionItems are conversation items as the session store takes them.
func SessionItems(items []Item) []session.Item {
	out := make([]session.Item, len(items))
	for i, it := range items {
		out[i] = session.Item{ID: it.ID, Type: it.Type, Data: it.Data}
	}
	return out
}

// Claim marks conversation id busy with a turn, or with a change the
// Conversations API makes, until release is called (any number of
// times); a conversation already busy is refused with a 409.
func (st *Store) Claim(id string) (release func(), err error) {
	st.busyMu.Lock()
	defer st.busyMu.Unlock()
	if st.busy[id] {
		return nil, &wire.Error{Status: fasthttp.StatusConflict, Type: "invalid_request_error", Code: "conversation_locked", Param: "conversation",
			Msg: fmt.Sprintf("Another request is in progress in conversation %s; retry once it has finished.", id)}
	}
	if st.busy == nil {
		st.busy = map[string]bool{}
	}
	st.busy[id] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			st.busyMu.Lock()
			delete(st.busy, id)
			st.busyMu.Unlock()
		})
	}, nil
}
