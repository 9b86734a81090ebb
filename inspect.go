package litequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Order sorts a job listing.
type Order string

const (
	OrderNewest  Order = "newest"   // highest id first (the default)
	OrderNextDue Order = "next-due" // earliest visible_at first, then priority
)

// JobFilter selects jobs for Jobs and DeadLetters. Zero fields select all:
// the zero JobFilter lists every job, however many there are.
type JobFilter struct {
	Queue  string
	Kind   string
	Group  string  // jobs of this group (EnqueueOptions.Group) only
	States []State // any of these; empty means every state
	Order  Order   // default OrderNewest
	Limit  int     // at most this many; 0 or negative means no limit (all)
	Offset int     // skip this many (after After), for paging
	// After, when not empty, starts the listing just after the job whose
	// JobInfo.Cursor(Order) it is (cursor.go); a value that is no such
	// cursor fails with ErrBadCursor. The job itself need not exist any
	// more.
	After string
}

// Jobs lists the jobs f selects, in f.Order. It reads a consistent snapshot
// and works on a read-only queue. A Queue or Kind that no name can be (it
// holds NUL or invalid UTF-8) selects nothing, on every backend.
func (q *Queue) Jobs(ctx context.Context, f JobFilter) ([]JobInfo, error) {
	now := unixNanos(q.clock)
	sf := store.JobFilter{Queue: f.Queue, Kind: f.Kind, Group: f.Group, Limit: f.Limit, Offset: f.Offset, Now: now}
	for _, st := range f.States {
		if _, err := ParseState(string(st)); err != nil {
			return nil, err
		}
		sf.States = append(sf.States, listState(st))
	}
	switch f.Order {
	case OrderNextDue:
		sf.Order = store.NextDue
	case OrderNewest, "":
		sf.Order = store.NewestFirst
	default:
		return nil, fmt.Errorf("litequeue: unknown order %q; use %q or %q", f.Order, OrderNewest, OrderNextDue)
	}
	if err := parseCursor(f.After, f.Order, &sf); err != nil {
		return nil, err
	}
	if !storableText(f.Queue) || !storableText(f.Kind) || !storableText(f.Group) {
		return []JobInfo{}, nil // no stored name holds NUL or invalid UTF-8
	}
	rows, err := q.store.Jobs(ctx, sf)
	if err != nil {
		return nil, wrapf("litequeue: list jobs: %w", err)
	}
	out := make([]JobInfo, 0, len(rows))
	for _, j := range rows {
		out = append(out, jobInfo(j, now))
	}
	return out, nil
}

// Job returns one job with its attempt history, or an error wrapping
// ErrNotFound.
func (q *Queue) Job(ctx context.Context, id int64) (JobInfo, error) {
	now := unixNanos(q.clock)
	j, as, err := q.store.Job(ctx, id)
	if err != nil {
		return JobInfo{}, wrapf("litequeue: %w", err)
	}
	info := jobInfo(j, now)
	info.Attempts = attemptRecords(as)
	info.Process = j.Process
	if err := q.fillWait(ctx, &info, j.Attempt, now); err != nil {
		return JobInfo{}, wrapf("litequeue: why job %d waits: %w", id, err)
	}
	if err := q.progressOf(ctx, &info); err != nil && !errors.Is(err, ErrNotFound) {
		return JobInfo{}, wrapf("litequeue: %w", err)
	}
	return info, nil
}

// PurgeCompleted deletes retained completed jobs that finished more than
// olderThan ago (0: all of them) and returns how many.
func (q *Queue) PurgeCompleted(ctx context.Context, olderThan time.Duration) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	return q.purgeCompletedBefore(ctx, q.clock.Now().Add(-olderThan).UnixNano()+boolInt(olderThan == 0))
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// QueueStats counts one queue's jobs by state. In JSON, OldestReady is a Go
// duration string ("1m30s"; "0s" when none is ready), as every duration in
// the package's JSON.
type QueueStats struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Scheduled int    `json:"scheduled"`
	Running   int    `json:"running"`
	Completed int    `json:"completed"`
	Dead      int    `json:"dead"`
	Cancelled int    `json:"cancelled"`
	// Waiting counts workflow jobs waiting for their parents (workflow.go).
	Waiting int `json:"waiting"`
	// Paused is true while the queue is paused (see Queue.Pause), since
	// PausedAt. A paused queue is listed even when it has no jobs.
	Paused   bool      `json:"paused"`
	PausedAt time.Time `json:"paused_at,omitzero"`
	// OldestReady is how long the longest-waiting ready job has been due;
	// 0 when none is ready.
	OldestReady time.Duration `json:"oldest_ready"`
	// NextDue is when the next scheduled job becomes ready; zero if none.
	NextDue time.Time `json:"next_due,omitzero"`
}

// Stats returns the counts of every queue in the file (and of every paused
// queue, jobs or not, with Paused set), sorted by queue name,
// at the queue's Clock's now. The counts are exact. On SQLite they are
// kept by every write (schema version 10), so the call costs about the same
// at a million jobs as at none; on PostgreSQL it counts the table, so its
// cost grows with the number of jobs: call it for dashboards and inspection,
// not per job.
func (q *Queue) Stats(ctx context.Context) ([]QueueStats, error) {
	now := unixNanos(q.clock)
	rows, err := q.store.Stats(ctx, now)
	if err != nil {
		return nil, wrapf("litequeue: stats: %w", err)
	}
	out := make([]QueueStats, 0, len(rows))
	for _, r := range rows {
		s := QueueStats{Queue: r.Queue, Ready: r.Ready, Scheduled: r.Scheduled, Running: r.Running,
			Completed: r.Completed, Dead: r.Dead, Cancelled: r.Cancelled, Waiting: r.Waiting}
		if r.OldestReadySince != 0 {
			// Saturated, not wrapped, for a time more than 292 years ago.
			s.OldestReady = time.Unix(0, now).Sub(time.Unix(0, r.OldestReadySince))
		}
		if r.NextDue != 0 {
			s.NextDue = time.Unix(0, r.NextDue)
		}
		out = append(out, s)
	}
	return q.addPaused(ctx, out)
}

// MarshalJSON writes OldestReady as a Go duration string.
func (s QueueStats) MarshalJSON() ([]byte, error) {
	type plain QueueStats
	return json.Marshal(struct {
		plain
		OldestReady string `json:"oldest_ready"`
	}{plain(s), s.OldestReady.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *QueueStats) UnmarshalJSON(data []byte) error {
	type plain QueueStats
	var v struct {
		plain
		OldestReady string `json:"oldest_ready"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	d, err := parseJSONDuration("oldest_ready", v.OldestReady)
	*s = QueueStats(v.plain)
	s.OldestReady = d
	return err
}

// FlushHistory writes every count of the history held in memory, the
// current minute's included, and waits for writes already under way. Stop
// and Close call it, so a process that ends within a minute keeps that
// minute's counts; call it to have them written sooner. A read-only queue
// has nothing to flush.
func (q *Queue) FlushHistory(ctx context.Context) error {
	h := q.hist
	if h == nil {
		return nil
	}
	h.mu.Lock()
	all := h.take(0)
	h.mu.Unlock()
	if _, err := h.settle(ctx); err != nil {
		h.putBack(all)
		return wrapf("litequeue: flush history: %w", err)
	}
	if len(all) == 0 {
		return nil
	}
	return h.write(ctx, all, minuteOf(q.clock.Now()))
}

// History returns the per-minute outcomes of the named queue ("" for every
// queue) from since on, oldest first: the rows written so far plus the
// counts still held in memory by this process. It reads through the
// history's minute index, at most 7 days of rows per queue. It works on a
// read-only queue (without in-memory counts).
//
// Counts taken from memory to be written are never missed nor counted
// twice: it waits (until ctx ends) for their writes under way before it
// reads, and reads again if another write started meanwhile.
func (q *Queue) History(ctx context.Context, queue string, since time.Time) ([]HistoryPoint, error) {
	from := minuteOf(since)
	h := q.hist
	for {
		gen := 0
		if h != nil {
			var err error
			if gen, err = h.settle(ctx); err != nil {
				return nil, wrapf("litequeue: history: %w", err)
			}
		}
		rows, err := q.store.History(ctx, queue, from)
		if err != nil {
			if errors.Is(err, store.ErrNoHistory) {
				return nil, err
			}
			return nil, wrapf("litequeue: history: %w", err)
		}
		if h != nil {
			h.mu.Lock()
			if h.started != gen {
				h.mu.Unlock()
				continue
			}
		}
		pts := mergeHistory(rows, h, queue, from)
		if h != nil {
			h.mu.Unlock()
		}
		return pts, nil
	}
}

// mergeHistory adds the counts of h (nil for none; h.mu held) of queue (""
// for every queue) from minute from on to the stored rows, and sorts the
// points by minute then queue.
func mergeHistory(rows []store.HistoryCount, h *history, queue string, from int64) []HistoryPoint {
	byKey := map[histKey]*HistoryPoint{}
	for _, r := range rows {
		byKey[histKey{r.Queue, r.Minute}] = &HistoryPoint{Queue: r.Queue, Minute: time.Unix(0, r.Minute*int64(time.Minute)),
			Enqueued: r.Enqueued, Succeeded: r.Succeeded, Retried: r.Retried, Dead: r.Dead}
	}
	if h != nil {
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
	return out
}

// Now returns the time of the queue's Clock, for callers (such as a
// dashboard) that show times relative to the queue's.
func (q *Queue) Now() time.Time { return q.clock.Now() }

// addPaused marks the paused queues in stats, adding those without jobs,
// sorted by queue name.
func (q *Queue) addPaused(ctx context.Context, stats []QueueStats) ([]QueueStats, error) {
	paused, err := q.store.Paused(ctx)
	if err != nil {
		return nil, wrapf("litequeue: stats: %w", err)
	}
	seen := map[string]bool{}
	for i := range stats {
		if at, ok := paused[stats[i].Queue]; ok {
			stats[i].Paused, stats[i].PausedAt = true, time.Unix(0, at)
		}
		seen[stats[i].Queue] = true
	}
	added := false
	for name, at := range paused {
		if !seen[name] {
			stats = append(stats, QueueStats{Queue: name, Paused: true, PausedAt: time.Unix(0, at)})
			added = true
		}
	}
	if added {
		sort.Slice(stats, func(i, j int) bool { return stats[i].Queue < stats[j].Queue })
	}
	return stats, nil
}
