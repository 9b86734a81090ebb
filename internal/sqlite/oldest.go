package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/litequeue/litequeue/internal/store"
)

// The oldest ready row of a queue beside many running rows whose lease
// lapsed: those stay in the claim index lq_jobs_kind_due at their lease's
// end, among the ready rows, and a range of the index may hold thousands of
// them and no ready row at all. oldestReady therefore reads each (priority,
// kind) range of the queue a few rows at a time, and a range only as far as
// the oldest ready row found so far: a range whose first rows are running
// ones is read past them only up to the answer, not to its end.

// oldestFirstRows is how many rows of a range the first pass reads.
const oldestFirstRows = 64

// oldestKindSQL is the first kind of queue ?1's live rows of priority ?2
// after kind ?3: one seek of the claim index.
const oldestKindSQL = `SELECT min(kind) FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1) AND priority = ?2 AND kind > ?3`

// oldestHeadSQL reads the first ?5 rows of a range due by ?4, in due order.
const oldestHeadSQL = `SELECT id, state, visible_at FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1) AND priority = ?2
	AND kind = ?3 AND visible_at <= ?4 ORDER BY visible_at, id LIMIT ?5`

// oldestRestSQL is the earliest pending row of a range due from ?4 to ?5.
const oldestRestSQL = `SELECT id, visible_at FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1) AND priority = ?2
	AND kind = ?3 AND visible_at >= ?4 AND visible_at <= ?5 AND state = 0 ORDER BY visible_at, id LIMIT 1`

// oldestReady finds sum's longest-waiting ready row when the count stopped
// at its limit: the earliest due pending row of the queue's
// store.OldestReadyLevels lowest priority levels, marking the answer capped
// when more levels exist.
func oldestReady(ctx context.Context, tx *sql.Tx, sum *store.QueueSummary, now int64) error {
	sum.OldestReadyID, sum.OldestReadyAt = 0, 0
	var rest []oldestRange
	var prio sql.NullInt64
	for level := 0; ; level++ {
		query, args := nextLivePrioritySQL, []any{sum.Queue, prio.Int64}
		if level == 0 {
			query, args = firstLivePrioritySQL, args[:1]
		}
		if err := tx.QueryRowContext(ctx, query, args...).Scan(&prio); err != nil {
			return err
		}
		if !prio.Valid {
			break
		}
		if level == store.OldestReadyLevels {
			sum.OldestReadyCapped = true
			break
		}
		kind := sql.NullString{Valid: true} // "" sorts before every kind
		for {
			if err := tx.QueryRowContext(ctx, oldestKindSQL, sum.Queue, prio.Int64, kind.String).Scan(&kind); err != nil {
				return err
			}
			if !kind.Valid {
				break
			}
			from, done, err := oldestHead(ctx, tx, sum, prio.Int64, kind.String, now)
			if err != nil {
				return err
			}
			if !done {
				rest = append(rest, oldestRange{prio.Int64, kind.String, from})
			}
		}
	}
	return oldestRest(ctx, tx, sum, rest, now)
}

// oldestRange is a range of the claim index whose first rows oldestHead
// read without finding a pending one.
type oldestRange struct {
	prio int64
	kind string
	from int64 // the due time of the last row read
}

// oldestRest reads the rest of each range of rest, from where oldestHead
// stopped up to the oldest ready row found so far (or now), and offers
// its first pending row.
func oldestRest(ctx context.Context, tx *sql.Tx, sum *store.QueueSummary, rest []oldestRange, now int64) error {
	for _, r := range rest {
		upTo := now
		if sum.OldestReadyID != 0 {
			if r.from > sum.OldestReadyAt {
				continue // nothing in this range can be older
			}
			upTo = sum.OldestReadyAt
		}
		var id, visible int64
		err := tx.QueryRowContext(ctx, oldestRestSQL, sum.Queue, r.prio, r.kind, r.from, upTo).Scan(&id, &visible)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		offerOldest(sum, id, visible)
	}
	return nil
}

// offerOldest makes the ready row id, due at visible, sum's oldest when it
// is due earlier than the one found so far, or as early with a lower id.
func offerOldest(sum *store.QueueSummary, id, visible int64) {
	if sum.OldestReadyID == 0 || visible < sum.OldestReadyAt || (visible == sum.OldestReadyAt && id < sum.OldestReadyID) {
		sum.OldestReadyID, sum.OldestReadyAt = id, visible
	}
}

// oldestHead reads the first oldestFirstRows rows of one range due by now
// and offers its first pending one. done says the range needs no more
// reading; otherwise from is the due time of the last row read.
func oldestHead(ctx context.Context, tx *sql.Tx, sum *store.QueueSummary, prio int64, kind string, now int64) (from int64, done bool, err error) {
	rows, err := tx.QueryContext(ctx, oldestHeadSQL, sum.Queue, prio, kind, now, oldestFirstRows)
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, visible int64
		var state store.State
		if err := rows.Scan(&id, &state, &visible); err != nil {
			return 0, false, err
		}
		n++
		from = visible
		if state == store.Pending {
			offerOldest(sum, id, visible)
			return 0, true, nil
		}
	}
	return from, n < oldestFirstRows, rows.Err()
}
