package litequeue

import (
	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// The Queue: the public handle, which adds the registered handlers and the
// running pools to what every part of a queue shares (core.go).

// Queue is a job queue on one SQLite file. It is safe for concurrent use.
type Queue struct {
	core

	// Guarded by core.mu. Start hands the running pools a copy of the
	// handlers and the middleware; Register and Use are refused while the
	// queue runs.
	handlers   map[string]*handler // by kind
	middleware []Middleware        // see Use
	run        *runState           // non-nil while started
}

// newQueue makes a queue on st; lite is st when it is the SQLite store.
func newQueue(o Options, st store.Backend, lite *sqlite.Store, readOnly bool) *Queue {
	q := &Queue{handlers: map[string]*handler{}}
	q.core.setup(o, st, lite, readOnly)
	q.txs.emit = q.emit
	return q
}
