package litequeue

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// The history is a small per-minute record of outcomes per queue, kept in
// the table lq_history for dashboards, since succeeded jobs are deleted by
// default. The queue counts its events in memory and writes the counts of
// past minutes through its writer when an event of a later minute arrives
// (no timer runs for it), and on FlushHistory. A crash loses at most the
// counts not yet written: those of the current minute, and of earlier
// minutes if no event came since. Rows older than HistoryRetention are
// deleted when counts are written.

// HistoryRetention is how long history rows are kept.
const HistoryRetention = 7 * 24 * time.Hour

// HistoryPoint is one queue's outcomes in one minute.
type HistoryPoint struct {
	Queue     string    `json:"queue"`
	Minute    time.Time `json:"minute"`    // the start of the minute
	Enqueued  int       `json:"enqueued"`  // jobs stored
	Succeeded int       `json:"succeeded"` // attempts that succeeded
	Retried   int       `json:"retried"`   // attempts that failed and will run again
	Dead      int       `json:"dead"`      // jobs that gave up
}

type histKey struct {
	queue  string
	minute int64
}

type histCounts struct{ enqueued, succeeded, retried, dead int }

// history is the in-memory part of one queue's history. A queue that keeps
// history (one not read-only) holds one and subscribes it to its events.
type history struct {
	st  store.Backend
	log *slog.Logger

	mu      sync.Mutex
	current int64 // the latest minute seen
	pending map[histKey]*histCounts
	// flying counts the writes of taken counts under way, started counts
	// every write ever started; idle is closed when flying drops to zero.
	flying, started int
	idle            chan struct{}
}

func newHistory(st store.Backend, log *slog.Logger) *history {
	return &history{st: st, log: log, pending: map[histKey]*histCounts{}}
}

func minuteOf(t time.Time) int64 {
	ns := t.UnixNano()
	m := ns / int64(time.Minute)
	if ns < 0 && ns%int64(time.Minute) != 0 {
		m--
	}
	return m
}

// record counts e in its minute; an event of a later minute than any seen
// sends the earlier minutes' counts to the writer, in the background (events
// may be emitted on the writer's own goroutine).
func (h *history) record(e Event) {
	m := minuteOf(e.Time)
	h.mu.Lock()
	c := h.pending[histKey{e.Queue, m}]
	if c == nil {
		c = &histCounts{}
	}
	switch e.Type {
	case EventEnqueued:
		c.enqueued++
	case EventSucceeded:
		c.succeeded++
	case EventRetrying:
		c.retried++
	case EventDead:
		c.dead++
	default:
		h.mu.Unlock()
		return
	}
	h.pending[histKey{e.Queue, m}] = c
	var done map[histKey]*histCounts
	if m > h.current {
		if h.current != 0 {
			done = h.take(m)
		}
		h.current = m
	}
	if len(done) > 0 {
		if h.flying == 0 {
			h.idle = make(chan struct{})
		}
		h.flying++
		h.started++
	}
	h.mu.Unlock()
	if len(done) > 0 {
		go func() {
			defer h.landed()
			h.write(context.Background(), done, m)
		}()
	}
}

// landed ends a write started by record.
func (h *history) landed() {
	h.mu.Lock()
	h.flying--
	if h.flying == 0 {
		close(h.idle)
	}
	h.mu.Unlock()
}

// settle waits until no write of taken counts is under way, or ctx ends,
// and returns the number of writes started so far.
func (h *history) settle(ctx context.Context) (int, error) {
	for {
		h.mu.Lock()
		if h.flying == 0 {
			n := h.started
			h.mu.Unlock()
			return n, nil
		}
		idle := h.idle
		h.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// wait waits for the writes of taken counts under way.
func (h *history) wait() { _, _ = h.settle(context.Background()) }

// putBack returns counts taken but not written to the pending ones.
func (h *history) putBack(counts map[histKey]*histCounts) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, c := range counts {
		p := h.pending[k]
		if p == nil {
			h.pending[k] = c
			continue
		}
		p.enqueued += c.enqueued
		p.succeeded += c.succeeded
		p.retried += c.retried
		p.dead += c.dead
	}
}

// take removes and returns the pending counts of minutes before m (all of
// them when m is 0). h.mu is held.
func (h *history) take(m int64) map[histKey]*histCounts {
	out := map[histKey]*histCounts{}
	for k, c := range h.pending {
		if m == 0 || k.minute < m {
			out[k] = c
			delete(h.pending, k)
		}
	}
	return out
}

// write adds counts to the stored history, now being the current minute.
func (h *history) write(ctx context.Context, counts map[histKey]*histCounts, now int64) error {
	rows := make([]store.HistoryCount, 0, len(counts))
	for k, c := range counts {
		rows = append(rows, store.HistoryCount{Queue: k.queue, Minute: k.minute,
			Enqueued: c.enqueued, Succeeded: c.succeeded, Retried: c.retried, Dead: c.dead})
	}
	err := h.st.AddHistory(ctx, rows, now-int64(HistoryRetention/time.Minute))
	if err != nil {
		h.log.Warn("litequeue: history counts not written", LogError, err.Error())
	}
	return err
}
