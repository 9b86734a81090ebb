package litequeue

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// DeadGroup is a set of dead letters that failed with the same normalised
// error message (see NormalizeError).
type DeadGroup struct {
	// Key is the normalised message shared by the group; pass it to
	// RequeueDeadGroup.
	Key   string `json:"key"`
	Count int    `json:"count"`
	// FirstSeen and LastSeen are the earliest and latest death in the group.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// SampleID and SampleError are the newest dead letter of the group and
	// its message as stored.
	SampleID    int64    `json:"sample_id"`
	SampleError string   `json:"sample_error"`
	Queues      []string `json:"queues"`
	Kinds       []string `json:"kinds"`
}

// DeadGroupQuery selects the dead letters DeadLetterGroups groups. Zero
// fields select all.
type DeadGroupQuery struct {
	Queue string
	Kind  string
	// Limit bounds the work: only the Limit most recent dead letters are
	// read (through the finished index). Default DefaultGroupLimit (10,000).
	Limit int
}

// DefaultGroupLimit is the default DeadGroupQuery.Limit.
const DefaultGroupLimit = 10_000

var (
	reUUID   = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	reHex    = regexp.MustCompile(`(?i)\b(0x)?[0-9a-f]*[0-9][0-9a-f]*\b`)
	reNum    = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)
	reQuoted = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	reSpace  = regexp.MustCompile(`\s+`)
)

// maxGroupKeyLen bounds a normalised message.
const maxGroupKeyLen = 200

// NormalizeError reduces an error message to the shape that groups dead
// letters: its first line, with quoted strings replaced by "…", UUIDs by
// <uuid>, hexadecimal words with a digit and
// numbers (also inside words such as 3s or 10ms) by <n>, runs of
// white space by one space, cut to 200 bytes. "job 42: timeout after 3s"
// and "job 7: timeout after 5s" give the same key. An empty message gives
// "(no error message)".
func NormalizeError(msg string) string {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	msg = reQuoted.ReplaceAllString(msg, `"…"`)
	msg = reUUID.ReplaceAllString(msg, "<uuid>")
	msg = reHex.ReplaceAllString(msg, "<n>")
	msg = reNum.ReplaceAllString(msg, "<n>")
	msg = strings.TrimSpace(reSpace.ReplaceAllString(msg, " "))
	if len(msg) > maxGroupKeyLen {
		cut := maxGroupKeyLen
		for cut > 0 && !isRuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	if msg == "" {
		return "(no error message)"
	}
	return msg
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// DeadLetterGroups groups the most recent dead letters (up to f.Limit) by
// normalised error message, largest group first (then most recent). It reads
// through the finished index, newest first, so its cost is bounded by
// f.Limit however many dead letters the file holds. It works on a read-only
// queue.
func (q *Queue) DeadLetterGroups(ctx context.Context, f DeadGroupQuery) ([]DeadGroup, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultGroupLimit
	}
	msgs, err := q.store.LatestDead(ctx, store.DeadFilter{Queue: f.Queue, Kind: f.Kind}, f.Limit)
	if err != nil {
		return nil, wrapf("litequeue: dead letter groups: %w", err)
	}
	byKey := map[string]*DeadGroup{}
	var order []*DeadGroup
	for _, m := range msgs {
		id, queue, kind, msg := m.ID, m.Queue, m.Kind, m.Message
		at := time.Unix(0, m.FinishedAt)
		key := NormalizeError(msg)
		g, ok := byKey[key]
		if !ok {
			g = &DeadGroup{Key: key, SampleID: id, SampleError: msg, FirstSeen: at, LastSeen: at}
			byKey[key] = g
			order = append(order, g)
		}
		g.Count++
		if at.Before(g.FirstSeen) {
			g.FirstSeen = at
		}
		if at.After(g.LastSeen) {
			g.LastSeen, g.SampleID, g.SampleError = at, id, msg
		}
		if !slices.Contains(g.Queues, queue) {
			g.Queues = append(g.Queues, queue)
		}
		if !slices.Contains(g.Kinds, kind) {
			g.Kinds = append(g.Kinds, kind)
		}
	}
	out := make([]DeadGroup, len(order))
	for i, g := range order {
		slices.Sort(g.Queues)
		slices.Sort(g.Kinds)
		out[i] = *g
	}
	slices.SortStableFunc(out, func(a, b DeadGroup) int { return b.Count - a.Count })
	return out, nil
}

// RequeueDeadGroup moves every dead letter f selects whose normalised error
// message is key (a DeadGroup.Key) back to ready, as Requeue does, and
// returns how many moved. Unlike DeadLetterGroups it reads every dead letter
// f selects (f.Limit is ignored), in chunks, so the whole group moves, not
// only its recent part. A dead letter whose idempotency key is now held by a
// live job stays dead and is not counted.
func (q *Queue) RequeueDeadGroup(ctx context.Context, key string, f DeadGroupQuery) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	sf := store.DeadFilter{Queue: f.Queue, Kind: f.Kind}
	const chunk = bulkChunk * 4
	cursor := int64(1<<63 - 1)
	total := 0
	for {
		msgs, err := q.store.DeadBefore(ctx, sf, cursor, chunk)
		if err != nil {
			return total, wrapf("litequeue: requeue dead group: %w", err)
		}
		var ids []int64
		for _, m := range msgs {
			if NormalizeError(m.Message) == key {
				ids = append(ids, m.ID)
			}
		}
		if len(ids) > 0 {
			n, err := q.RequeueMatching(ctx, JobQuery{IDs: ids})
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
