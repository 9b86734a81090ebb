package litequeue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/litequeue/litequeue/internal/sqlite"
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

// history is the in-memory part of one queue's history.
type history struct {
	mu      sync.Mutex
	current int64 // the latest minute seen
	pending map[histKey]*histCounts
	flights sync.WaitGroup
}

// histories holds each open queue's history, keyed weakly so that a queue
// that is garbage collected drops its entry (the lead may move it to a field
// of Queue).
var histories sync.Map // weak.Pointer[Queue] → *history

func (q *Queue) history() *history {
	key := weak.Make(q)
	if h, ok := histories.Load(key); ok {
		return h.(*history)
	}
	h, loaded := histories.LoadOrStore(key, &history{pending: map[histKey]*histCounts{}})
	if !loaded {
		runtime.AddCleanup(q, func(k weak.Pointer[Queue]) { histories.Delete(k) }, key)
	}
	return h.(*history)
}

func minuteOf(t time.Time) int64 {
	ns := t.UnixNano()
	m := ns / int64(time.Minute)
	if ns < 0 && ns%int64(time.Minute) != 0 {
		m--
	}
	return m
}

// recordHistory counts e in its minute; an event of a later minute than
// any seen sends the earlier minutes' counts to the writer, in the
// background (emit may run on the writer's own goroutine).
func (q *Queue) recordHistory(e Event) {
	if q.historyOff() {
		return
	}
	h := q.history()
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
		h.flights.Add(1)
	}
	h.mu.Unlock()
	if len(done) > 0 {
		go func() {
			defer h.flights.Done()
			q.writeHistory(context.Background(), done, m)
		}()
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

// errNoHistoryTable is the error of a file whose schema predates lq_history.
var errNoHistoryTable = errors.New("litequeue: the file has no lq_history table (its schema predates the history)")

func (q *Queue) writeHistory(ctx context.Context, counts map[histKey]*histCounts, now int64) error {
	err := q.lite.Do(ctx, func(ctx context.Context, tx sqlite.Execer) error {
		for k, c := range counts {
			if _, err := tx.ExecContext(ctx, `INSERT INTO lq_history (queue, minute, enqueued, succeeded, retried, dead)
				VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (queue, minute) DO UPDATE SET
				enqueued = enqueued + excluded.enqueued, succeeded = succeeded + excluded.succeeded,
				retried = retried + excluded.retried, dead = dead + excluded.dead`,
				k.queue, k.minute, c.enqueued, c.succeeded, c.retried, c.dead); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM lq_history WHERE minute < ?`, now-int64(HistoryRetention/time.Minute))
		return err
	})
	if err != nil && strings.Contains(err.Error(), "no such table: lq_history") {
		err = errNoHistoryTable
	}
	if err != nil {
		q.log.Warn("litequeue: history counts not written", LogError, err.Error())
	}
	return err
}

// historySQL reads history rows from a minute on, through the minute index.
const historySQL = `SELECT queue, minute, enqueued, succeeded, retried, dead FROM lq_history WHERE minute >= ?`

// FlushHistory writes every count of the history held in memory, the
// current minute's included, and waits for writes already under way. Call
// it before Close to keep the last minute's counts. A read-only queue has
// nothing to flush.
func (q *Queue) FlushHistory(ctx context.Context) error {
	if q.historyOff() {
		return nil
	}
	h := q.history()
	h.mu.Lock()
	all := h.take(0)
	h.mu.Unlock()
	h.flights.Wait()
	if len(all) == 0 {
		return nil
	}
	return q.writeHistory(ctx, all, minuteOf(q.clock.Now()))
}

// History returns the per-minute outcomes of the named queue ("" for every
// queue) from since on, oldest first: the rows written so far plus the
// counts still held in memory by this process. It reads through the
// history's minute index, at most 7 days of rows per queue. It works on a
// read-only queue (without in-memory counts).
func (q *Queue) History(ctx context.Context, queue string, since time.Time) ([]HistoryPoint, error) {
	from := minuteOf(since)
	query := historySQL
	args := []any{from}
	if queue != "" {
		query += ` AND queue = ?`
		args = append(args, queue)
	}
	rows, err := q.lite.DB().QueryContext(ctx, query, args...)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil, fmt.Errorf("%w", errNoHistoryTable)
		}
		return nil, fmt.Errorf("litequeue: history: %w", err)
	}
	defer rows.Close()
	byKey := map[histKey]*HistoryPoint{}
	for rows.Next() {
		var p HistoryPoint
		var m int64
		if err := rows.Scan(&p.Queue, &m, &p.Enqueued, &p.Succeeded, &p.Retried, &p.Dead); err != nil {
			return nil, err
		}
		p.Minute = time.Unix(0, m*int64(time.Minute))
		byKey[histKey{p.Queue, m}] = &p
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !q.historyOff() {
		h := q.history()
		h.mu.Lock()
		for k, c := range h.pending {
			if k.minute < from || (queue != "" && k.queue != queue) {
				continue
			}
			p := byKey[k]
			if p == nil {
				p = &HistoryPoint{Queue: k.queue, Minute: time.Unix(0, k.minute*int64(time.Minute))}
				byKey[k] = p
			}
			p.Enqueued += c.enqueued
			p.Succeeded += c.succeeded
			p.Retried += c.retried
			p.Dead += c.dead
		}
		h.mu.Unlock()
	}
	out := make([]HistoryPoint, 0, len(byKey))
	for _, p := range byKey {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b HistoryPoint) int {
		if c := a.Minute.Compare(b.Minute); c != 0 {
			return c
		}
		return strings.Compare(a.Queue, b.Queue)
	})
	return out, nil
}

// Now returns the time of the queue's Clock, for callers (such as a
// dashboard) that show times relative to the queue's.
func (q *Queue) Now() time.Time { return q.clock.Now() }

// historyOff reports whether the queue keeps no history: it is read-only,
// or its store is not SQLite (where the history table lives for now).
func (q *Queue) historyOff() bool { return q.lite == nil || q.readOnly }
