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

// addCountSQL adds n to the count of queue's rows in state.
const addCountSQL = `INSERT INTO lq_counts (queue, state, n) VALUES (?1, ?2, ?3)
	ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n`

// noState is the "to" of moveCount for rows deleted.
const noState store.State = -1

// countKey names one count: a queue's rows in one state.
type countKey struct {
	queue string
	state store.State
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
}

// mark returns the position to truncate to if the op now starting fails.
func (c *countingTx) mark() int { return len(c.log) }

// truncate drops the entries logged after mark.
func (c *countingTx) truncate(mark int) { c.log = c.log[:mark] }

// flush writes the sums of the logged changes, one statement per count that
// changed (none when they cancel out), in a stable order, and empties the
// log.
func (c *countingTx) flush(ctx context.Context) error {
	if len(c.log) == 0 {
		return nil
	}
	sums := make(map[countKey]int, 4)
	for _, d := range c.log {
		sums[d.countKey] += d.n
	}
	c.log = c.log[:0]
	keys := make([]countKey, 0, len(sums))
	for k, n := range sums {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b countKey) int {
		return cmp.Or(cmp.Compare(a.queue, b.queue), cmp.Compare(a.state, b.state))
	})
	for _, k := range keys {
		if _, err := c.Execer.ExecContext(ctx, addCountSQL, k.queue, int(k.state), sums[k]); err != nil {
			return err
		}
	}
	return nil
}

// addCount adds n to the count of queue's rows in state, on tx: logged when
// tx is the writer's countingTx, written at once otherwise. n == 0 does
// nothing.
func addCount(ctx context.Context, tx Execer, queue string, state store.State, n int) error {
	if n == 0 {
		return nil
	}
	if c, ok := tx.(*countingTx); ok {
		c.log = append(c.log, countDelta{countKey{queue, state}, n})
		return nil
	}
	_, err := tx.ExecContext(ctx, addCountSQL, queue, int(state), n)
	return err
}

// moveCount records that n rows of queue went from state from to state to
// (noState: deleted).
func moveCount(ctx context.Context, tx Execer, queue string, from, to store.State, n int) error {
	if n == 0 {
		return nil
	}
	if err := addCount(ctx, tx, queue, from, -n); err != nil {
		return err
	}
	if to == noState {
		return nil
	}
	return addCount(ctx, tx, queue, to, n)
}

// execCounted runs query, a statement that ends in RETURNING queue, state
// (the state each row is in after it: for a DELETE, the one it had), and
// records each row's move: from the state it returned to to (noState for a
// DELETE), or, for an UPDATE (to == noState is false), from from to the
// state returned. It returns how many rows the statement changed.
func execCounted(ctx context.Context, tx Execer, query string, from store.State, deleted bool, args ...any) (int, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	type moved struct {
		queue    string
		from, to store.State
	}
	counts := map[moved]int{}
	total := 0
	for rows.Next() {
		var queue string
		var st int64
		if err := rows.Scan(&queue, &st); err != nil {
			return 0, err
		}
		m := moved{queue, from, store.State(st)}
		if deleted {
			m = moved{queue, store.State(st), noState}
		}
		counts[m]++
		total++
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	for m, n := range counts {
		if err := moveCount(ctx, tx, m.queue, m.from, m.to, n); err != nil {
			return 0, err
		}
	}
	return total, nil
}
