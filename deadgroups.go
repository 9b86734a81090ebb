package litequeue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// DeadGroup is a set of dead letters that failed with the same normalised
// error message (see NormalizeError).
type DeadGroup struct {
	// Key is the normalised message shared by the group; pass it to
	// RequeueGroup.
	Key   string `json:"key"`
	Count int    `json:"count"`
	// FirstSeen and LastSeen are the earliest and latest death in the group.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// SampleID and SampleError are the newest dead letter of the group and
	// the start of its message (its first DeadMessagePrefix characters;
	// Job has it whole).
	SampleID    int64  `json:"sample_id"`
	SampleError string `json:"sample_error"`
	// Queues and Kinds are the queues and kinds of the group's dead
	// letters, sorted; at most maxGroupNames (50) of each, the first met
	// (newest first).
	Queues []string `json:"queues"`
	Kinds  []string `json:"kinds"`
	// Merged, when above 0, marks the remainder group that GroupDeadLetters
	// returns last when there are more groups than GroupLimits.MaxGroups:
	// the dead letters of the Merged smallest groups, counted together. Its
	// Key is "" (it cannot be requeued as one group); its sample, times,
	// queues and kinds are those of all its dead letters.
	Merged int `json:"merged,omitempty"`
}

// DeadMessagePrefix is how much of each dead letter's message the grouping
// reads: its first 1,024 characters.
const DeadMessagePrefix = store.DeadMessageChars

// GroupLimits bounds the work and the answer of GroupDeadLetters.
type GroupLimits struct {
	// Limit bounds the work: only the Limit most recent dead letters are
	// read (through the finished index). Default DefaultGroupLimit (10,000).
	Limit int
	// MaxGroups bounds the answer: when the dead letters read fall into more
	// groups, the MaxGroups-1 largest are returned, then one remainder
	// group with the others (see DeadGroup.Merged). Default
	// DefaultMaxGroups (100).
	MaxGroups int
}

// Defaults of GroupLimits.
const (
	DefaultGroupLimit = 10_000
	DefaultMaxGroups  = 100
)

// DeadGroupQuery selects the dead letters DeadLetterGroups groups. Zero
// fields select all.
//
// Deprecated: use JobQuery and GroupLimits with GroupDeadLetters.
type DeadGroupQuery struct {
	Queue     string
	Kind      string
	Limit     int // GroupLimits.Limit
	MaxGroups int // GroupLimits.MaxGroups
}

// maxGroupNames bounds DeadGroup.Queues and DeadGroup.Kinds.
const maxGroupNames = 50

// normalizer memoizes NormalizeError over one read of dead letters, in
// which many messages repeat; it forgets all at maxMemo entries.
type normalizer map[string]string

const maxMemo = 10_000

func (m normalizer) key(msg string) string {
	msg = cutAtRune(msg, maxNormalizeInput)
	k, ok := m[msg]
	if !ok {
		if len(m) >= maxMemo {
			clear(m)
		}
		k = NormalizeError(msg)
		m[msg] = k
	}
	return k
}

// addName adds name to the list names of at most maxGroupNames.
func addName(names []string, name string) []string {
	if len(names) >= maxGroupNames || slices.Contains(names, name) {
		return names
	}
	return append(names, name)
}

// GroupDeadLetters groups the most recent dead letters f selects (up to
// l.Limit; f.States is ignored) by normalised error message, largest group
// first (then most recent), at most l.MaxGroups groups (the last one the
// remainder, see DeadGroup.Merged). It reads through the finished index,
// newest first, and only the start of each message (DeadMessagePrefix), so
// its cost is bounded by l.Limit however many dead letters the file holds
// and however long their messages. It works on a read-only queue.
func (q *Queue) GroupDeadLetters(ctx context.Context, f JobQuery, l GroupLimits) ([]DeadGroup, error) {
	if l.Limit <= 0 {
		l.Limit = DefaultGroupLimit
	}
	if l.MaxGroups <= 0 {
		l.MaxGroups = DefaultMaxGroups
	}
	sq, ok, err := deadQuery(f, unixNanos(q.clock))
	if err != nil || !ok {
		return nil, err
	}
	msgs, err := q.store.LatestDead(ctx, sq, l.Limit)
	if err != nil {
		return nil, wrapf("litequeue: dead letter groups: %w", err)
	}
	byKey := map[string]*DeadGroup{}
	var order []*DeadGroup
	keys := normalizer{}
	for _, m := range msgs {
		key := keys.key(m.Message)
		g, ok := byKey[key]
		if !ok {
			g = &DeadGroup{Key: key}
			byKey[key] = g
			order = append(order, g)
		}
		g.add(m)
	}
	out := make([]DeadGroup, len(order))
	for i, g := range order {
		out[i] = *g
	}
	slices.SortStableFunc(out, func(a, b DeadGroup) int { return b.Count - a.Count })
	if len(out) > l.MaxGroups {
		rest := DeadGroup{Merged: len(out) - l.MaxGroups + 1}
		for _, g := range out[l.MaxGroups-1:] {
			rest.merge(g)
		}
		out = append(out[:l.MaxGroups-1], rest)
	}
	for i := range out {
		slices.Sort(out[i].Queues)
		slices.Sort(out[i].Kinds)
	}
	return out, nil
}

// DeadLetterGroups groups the most recent dead letters f selects, as
// GroupDeadLetters does.
//
// Deprecated: use GroupDeadLetters.
func (q *Queue) DeadLetterGroups(ctx context.Context, f DeadGroupQuery) ([]DeadGroup, error) {
	return q.GroupDeadLetters(ctx, JobQuery{Queue: f.Queue, Kind: f.Kind}, GroupLimits{Limit: f.Limit, MaxGroups: f.MaxGroups})
}

// deadQuery converts f to the store's selection of dead letters at now
// (see storeQuery); f.States is ignored.
func deadQuery(f JobQuery, now int64) (store.JobQuery, bool, error) {
	f.States = nil
	return storeQuery(f, now)
}

// add counts the dead letter m into g.
func (g *DeadGroup) add(m store.DeadMessage) {
	at := time.Unix(0, m.FinishedAt)
	if g.Count == 0 || at.Before(g.FirstSeen) {
		g.FirstSeen = at
	}
	if g.Count == 0 || at.After(g.LastSeen) {
		g.LastSeen, g.SampleID, g.SampleError = at, m.ID, m.Message
	}
	g.Count++
	g.Queues = addName(g.Queues, m.Queue)
	g.Kinds = addName(g.Kinds, m.Kind)
}

// merge counts the group o into g.
func (g *DeadGroup) merge(o DeadGroup) {
	if g.Count == 0 || o.FirstSeen.Before(g.FirstSeen) {
		g.FirstSeen = o.FirstSeen
	}
	if g.Count == 0 || o.LastSeen.After(g.LastSeen) {
		g.LastSeen, g.SampleID, g.SampleError = o.LastSeen, o.SampleID, o.SampleError
	}
	g.Count += o.Count
	for _, q := range o.Queues {
		g.Queues = addName(g.Queues, q)
	}
	for _, k := range o.Kinds {
		g.Kinds = addName(g.Kinds, k)
	}
}

// RequeueGroup moves every dead letter f selects (f.States is ignored)
// whose normalised error message is key (a DeadGroup.Key) back to ready, as
// Requeue does, and returns how many moved. Unlike GroupDeadLetters it reads
// every dead letter f selects, in chunks, so the whole group moves, not
// only its recent part. A dead letter whose idempotency key is now held by
// a live job stays dead and is not counted.
func (q *Queue) RequeueGroup(ctx context.Context, key string, f JobQuery) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	return q.eachOfDeadGroup(ctx, key, f, "requeue dead group", func(ids []int64) (int, error) {
		return q.RequeueJobs(ctx, JobQuery{IDs: ids})
	})
}

// RequeueDeadGroup moves the dead letters f selects whose normalised error
// message is key back to ready, as RequeueGroup does (f.Limit and
// f.MaxGroups are ignored).
//
// Deprecated: use RequeueGroup.
func (q *Queue) RequeueDeadGroup(ctx context.Context, key string, f DeadGroupQuery) (int, error) {
	return q.RequeueGroup(ctx, key, JobQuery{Queue: f.Queue, Kind: f.Kind})
}

// ListDeadGroup returns one page of the dead letters f selects (f.States is
// ignored) whose normalised error message is key (a DeadGroup.Key), highest
// id first, as ListJobs pages: p.Before is the cursor (0: from the newest),
// p.Limit the most jobs on the page (default DefaultPageLimit), and
// p.ScanLimit the most dead letters the page reads, through the index of
// finished jobs (default DefaultGroupLimit); a page that read that many
// before finding Limit matches is Partial, and Next continues below it.
// ScannedFrom and ScannedTo are the lowest and highest id read.
func (q *Queue) ListDeadGroup(ctx context.Context, key string, f JobQuery, p PageRequest) (JobPage, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	if p.ScanLimit <= 0 {
		p.ScanLimit = DefaultGroupLimit
	}
	sq, ok, err := deadQuery(f, unixNanos(q.clock))
	if err != nil || !ok {
		return JobPage{}, err
	}
	cursor := p.Before
	if cursor <= 0 {
		cursor = 1<<63 - 1
	}
	var page JobPage
	var ids []int64
	keys := normalizer{}
	scanned := 0
	const chunk = bulkChunk * 4
scan:
	for scanned < p.ScanLimit {
		n := min(chunk, p.ScanLimit-scanned)
		msgs, err := q.store.DeadBefore(ctx, sq, cursor, n)
		if err != nil {
			return JobPage{}, wrapf("litequeue: list dead group: %w", err)
		}
		for i, m := range msgs {
			if page.ScannedTo == 0 {
				page.ScannedTo = m.ID
			}
			page.ScannedFrom, cursor = m.ID, m.ID
			scanned++
			if keys.key(m.Message) != key {
				continue
			}
			ids = append(ids, m.ID)
			if len(ids) == p.Limit {
				if i < len(msgs)-1 || len(msgs) == n {
					page.Next = m.ID // more may follow
				}
				break scan
			}
		}
		if len(msgs) < n {
			break // no dead letter is left below
		}
		if scanned >= p.ScanLimit {
			page.Next, page.Partial = cursor, true
		}
	}
	for _, id := range ids {
		j, err := q.Job(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since it was read
		}
		if err != nil {
			return JobPage{}, err
		}
		page.Jobs = append(page.Jobs, j)
	}
	return page, nil
}

// DeleteDeadGroup deletes every dead letter f selects (f.States is ignored)
// whose normalised error message is key (a DeadGroup.Key), with its
// history, and returns how many it deleted. Like RequeueGroup it reads
// every dead letter f selects, in chunks, so the whole group goes, not only
// its recent part. An empty key deletes nothing and is an error wrapping
// ErrInvalidJob.
func (q *Queue) DeleteDeadGroup(ctx context.Context, key string, f JobQuery) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	if key == "" {
		return 0, fmt.Errorf("litequeue: delete dead group: no group key given (use a DeadGroup.Key): %w", ErrInvalidJob)
	}
	return q.eachOfDeadGroup(ctx, key, f, "delete dead group", func(ids []int64) (int, error) {
		return q.DeleteJobs(ctx, JobQuery{IDs: ids, States: []State{StateDead}})
	})
}

// eachOfDeadGroup reads every dead letter f selects (f.States is
// ignored), in chunks from the newest, and calls act with the ids of each
// chunk's dead letters whose normalised error message is key; it returns
// the sum of what act returns, and stops at the first error (what names
// the operation in a read's error).
func (q *Queue) eachOfDeadGroup(ctx context.Context, key string, f JobQuery, what string, act func(ids []int64) (int, error)) (int, error) {
	sq, ok, err := deadQuery(f, unixNanos(q.clock))
	if err != nil || !ok {
		return 0, err
	}
	const chunk = bulkChunk * 4
	cursor := int64(1<<63 - 1)
	total := 0
	keys := normalizer{}
	for {
		msgs, err := q.store.DeadBefore(ctx, sq, cursor, chunk)
		if err != nil {
			return total, wrapf("litequeue: "+what+": %w", err)
		}
		var ids []int64
		for _, m := range msgs {
			if keys.key(m.Message) == key {
				ids = append(ids, m.ID)
			}
		}
		if len(ids) > 0 {
			n, err := act(ids)
			total += n
			if err != nil {
				return total, err
			}
		}
		if len(msgs) < chunk {
			return total, nil
		}
		cursor = msgs[len(msgs)-1].ID
	}
}
