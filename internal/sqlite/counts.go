package sqlite

import (
	"cmp"
	"context"
	"slices"

	"github.com/litequeue/litequeue/internal/store"
)

// Every statement of the store that adds, removes or moves rows of lq_jobs
// between states tells lq_counts (migration 0010) what it moved, in the
// same transaction: addCount and moveCount. Inside the writer's transaction
// the changes gather in countingTx and are written once before the commit,
// one row per queue and state they touch; on any other transaction (a
// caller's EnqueueTx or CompleteTx) they are written at once.

// addCountSQL adds n to the count of queue's rows in state whose due bucket
// is due. A count that falls to 0 stays as a row of n = 0 (Stats skips
// those) until pruneCounts deletes it: a delete of its own on every change
// that empties a count cost a statement per transaction.
const addCountSQL = `INSERT INTO lq_counts (queue, state, due, n) VALUES (?1, ?2, ?3, ?4)
	ON CONFLICT (queue, state, due) DO UPDATE SET n = n + excluded.n`

// pruneCountsSQL deletes the counts that fell to 0: the due buckets of
// pending rows that have all been claimed, mostly, one per queue every
// 2^dueShift ns.
const pruneCountsSQL = `DELETE FROM lq_counts WHERE n = 0`

// pruneEvery is how many writer transactions that lowered a count pass
// between two runs of pruneCountsSQL, which keeps the rows of n = 0 few
// (lq_counts stays a page or two) at a cost too small to measure.
const pruneEvery = 1024

// dueShift sets the span of a due bucket: pending rows are counted by
// visible_at >> dueShift (2^38 ns, about 4.6 minutes), so that Stats can
// tell ready from scheduled by adding whole buckets and reading only the
// rows of the bucket that holds now (migration 0010 uses the same shift).
const dueShift = 38

// dueBucket is the due bucket of a pending row visible at visible.
func dueBucket(visible int64) int64 { return visible >> dueShift }

// noState is the state of the "to" of a move for rows deleted.
const noState store.State = -1

// countKey names one count: a queue's rows in one state (and, pending, one
// due bucket; 0 for the other states).
type countKey struct {
	queue string
	state store.State
	due   int64
}

// countOf is the key of queue's rows in state st, visible at visible.
func countOf(queue string, st store.State, visible int64) countKey {
	if st != store.Pending {
		return countKey{queue: queue, state: st}
	}
	return countKey{queue: queue, state: st, due: dueBucket(visible)}
}

// countDelta is one change of a count.
type countDelta struct {
	countKey
	n int
}

// countingTx is the writer's transaction while its ops run: the changes of
// the counts gather in log until flush writes them. An op that rolls back
// to its savepoint drops its own entries (truncate).
type countingTx struct {
	Execer
	log []countDelta
	// lowered, the writer's, counts the flushes that lowered a count since
	// the last pruneCountsSQL; nil (a caller's transaction) never prunes.
	lowered *int
}

// mark returns the position to truncate to if the op now starting fails.
func (c *countingTx) mark() int { return len(c.log) }

// truncate drops the entries logged after mark.
func (c *countingTx) truncate(mark int) { c.log = c.log[:mark] }

// flush writes the sums of the logged changes, one statement per count that
// changed (none when they cancel out), in a stable order, and empties the
// log; every pruneEvery flushes that lowered a count it also deletes the
// counts that are 0.
func (c *countingTx) flush(ctx context.Context) error {
	if len(c.log) == 0 {
		return nil
	}
	log := c.log
	c.log = c.log[:0]
	slices.SortFunc(log, func(a, b countDelta) int {
		return cmp.Or(cmp.Compare(a.queue, b.queue), cmp.Compare(a.state, b.state), cmp.Compare(a.due, b.due))
	})
	lowered := false
	for i := 0; i < len(log); {
		k, n := log[i].countKey, 0
		for ; i < len(log) && log[i].countKey == k; i++ {
			n += log[i].n
		}
		if n == 0 {
			continue
		}
		if n < 0 {
			lowered = true
		}
		if _, err := c.ExecContext(ctx, addCountSQL, k.queue, int(k.state), k.due, n); err != nil {
			return err
		}
	}
	if !lowered || c.lowered == nil {
		return nil
	}
	if *c.lowered++; *c.lowered < pruneEvery {
		return nil
	}
	*c.lowered = 0
	_, err := c.ExecContext(ctx, pruneCountsSQL)
	return err
}

// writeCount adds n to the count k on tx (a caller's transaction), deleting
// it when it fell to 0.
func writeCount(ctx context.Context, tx Execer, k countKey, n int) error {
	if _, err := tx.ExecContext(ctx, addCountSQL, k.queue, int(k.state), k.due, n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, dropCountSQL, k.queue, int(k.state), k.due)
	return err
}

// dropCountSQL deletes one count if it fell to 0.
const dropCountSQL = `DELETE FROM lq_counts WHERE queue = ?1 AND state = ?2 AND due = ?3 AND n = 0`

// addCount adds n to the count k, on tx: logged when tx is the writer's
// countingTx, written at once otherwise. n == 0 does nothing.
func addCount(ctx context.Context, tx Execer, k countKey, n int) error {
	if n == 0 {
		return nil
	}
	if c, ok := tx.(*countingTx); ok {
		c.log = append(c.log, countDelta{k, n})
		return nil
	}
	return writeCount(ctx, tx, k, n)
}

// moveCount records that n rows went from the count from to the count to
// (state noState: deleted).
func moveCount(ctx context.Context, tx Execer, from, to countKey, n int) error {
	if n == 0 {
		return nil
	}
	if err := addCount(ctx, tx, from, -n); err != nil {
		return err
	}
	if to.state == noState {
		return nil
	}
	return addCount(ctx, tx, to, n)
}

// removed is the "to" of a move for rows deleted.
var removed = countKey{state: noState}

// execCounted runs query, a statement that ends in RETURNING queue, state,
// visible_at, and records each row's move as move says from what it
// returned (for an UPDATE, the row after it; for a DELETE, the row
// deleted). It returns how many rows the statement changed.
func execCounted(ctx context.Context, tx Execer, query string, move func(queue string, st store.State, visible int64) (from, to countKey), args ...any) (int, error) {
	rs, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rs.Close()
	type moved struct{ from, to countKey }
	counts := map[moved]int{}
	total := 0
	for rs.Next() {
		var queue string
		var st store.State
		var visible int64
		if err := rs.Scan(&queue, &st, &visible); err != nil {
			return 0, err
		}
		from, to := move(queue, st, visible)
		counts[moved{from, to}]++
		total++
	}
	if err := rs.Err(); err != nil {
		return 0, err
	}
	if err := rs.Close(); err != nil {
		return 0, err
	}
	for m, n := range counts {
		if err := moveCount(ctx, tx, m.from, m.to, n); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// fromRunning is the move of a statement that changed running rows into
// what it returned.
func fromRunning(queue string, st store.State, visible int64) (countKey, countKey) {
	return countOf(queue, store.Running, 0), countOf(queue, st, visible)
}

// gone is the move of a DELETE: the rows it returned are no more.
func gone(queue string, st store.State, visible int64) (countKey, countKey) {
	return countOf(queue, st, visible), removed
}
