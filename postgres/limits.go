package postgres

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Flow control (store.Limiter): the limits stored in lq_queues and the claims
// of limited queues. A limited claim locks its queue's settings row (FOR
// UPDATE) before it counts what runs, so the claims of one limited queue,
// from any process, follow one another; claims of queues without limits
// never take that lock and keep their concurrent SKIP LOCKED claims.

// flowRunningSQL counts, by group, the running rows of queue $1 that a
// limited claim started and whose lease has not lapsed at $2: a range of
// lq_jobs_flow, which holds no other rows. It counts created_at, which the
// index lacks, so that the scan reads the heap and marks the entries of
// finished jobs dead (see priorityWalk).
const flowRunningSQL = `SELECT grp, count(created_at) FROM lq_jobs
	WHERE queue = $1 AND state = 1 AND flow IS NOT NULL AND visible_at > $2 GROUP BY grp`

// flowNextFreeSQL is the earliest time after $2 when a limited claim of
// queue $1 may take more: the earliest lease end of those rows, or the
// earliest VisibleAt after $2 of the queue's live rows of the kinds $3 —
// per priority (priorityWalk, whose seeks read the heap so that they mark
// the entries of finished jobs dead instead of stepping over them on every
// call) and kind, one seek of lq_jobs_kind_due.
var flowNextFreeSQL = `SELECT least(
    (SELECT min(visible_at) FROM lq_jobs WHERE queue = $1 AND state = 1 AND flow IS NOT NULL AND visible_at > $2),
    (` + priorityWalk("") + `
    SELECT min(d.visible_at) FROM p CROSS JOIN unnest($3::text[]) AS k(kind) CROSS JOIN LATERAL (
        SELECT visible_at FROM lq_jobs WHERE queue = $1 AND state IN (0, 1) AND priority = p.prio AND kind = k.kind
          AND visible_at > $2 ORDER BY visible_at LIMIT 1) d))`

const limitsCols = `concurrency, key_concurrency, ordered, rate_n, rate_per, key_rate_n, key_rate_per`

func scanLimits(row interface{ Scan(...any) error }, l *store.Limits) error {
	return row.Scan(&l.Concurrency, &l.KeyConcurrency, &l.Ordered, &l.RateN, &l.RatePer, &l.KeyRateN, &l.KeyRatePer)
}

// SetLimits implements store.Limiter.
func (s *pgStore) SetLimits(ctx context.Context, queue string, l store.Limits) (store.Limits, error) {
	if err := s.writable(); err != nil {
		return store.Limits{}, err
	}
	var prev store.Limits
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		prev = store.Limits{}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_queues (queue) VALUES ($1) ON CONFLICT (queue) DO NOTHING`), queue); err != nil {
			return err
		}
		if err := scanLimits(tx.QueryRowContext(ctx, s.q(`SELECT `+limitsCols+` FROM lq_queues WHERE queue = $1 FOR UPDATE`), queue), &prev); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE lq_queues SET concurrency = $2, key_concurrency = $3, ordered = $4,
			rate_n = $5, rate_per = $6, key_rate_n = $7, key_rate_per = $8 WHERE queue = $1`),
			queue, l.Concurrency, l.KeyConcurrency, l.Ordered, l.RateN, l.RatePer, l.KeyRateN, l.KeyRatePer); err != nil {
			return err
		}
		if l.Any() && !prev.Any() {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE lq_jobs SET flow = 1 WHERE queue = $1 AND state = 1 AND flow IS NULL`), queue); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, notifySQL, s.channel, queue)
		return err
	})
	return prev, err
}

// Limits implements store.Limiter.
func (s *pgStore) Limits(ctx context.Context) (map[string]store.Limits, error) {
	return readValue(s, ctx, func() (map[string]store.Limits, error) {
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT queue, `+limitsCols+` FROM lq_queues
			WHERE concurrency <> 0 OR key_concurrency <> 0 OR ordered OR rate_n <> 0 OR key_rate_n <> 0`))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string]store.Limits{}
		for rows.Next() {
			var q string
			var l store.Limits
			if err := rows.Scan(&q, &l.Concurrency, &l.KeyConcurrency, &l.Ordered, &l.RateN, &l.RatePer, &l.KeyRateN, &l.KeyRatePer); err != nil {
				return nil, err
			}
			out[q] = l
		}
		return out, rows.Err()
	})
}

// LimitsNextFree implements store.Limiter.
func (s *pgStore) LimitsNextFree(ctx context.Context, queue string, kinds []string, now int64) (int64, bool, error) {
	if kinds == nil {
		kinds = []string{}
	}
	v, err := readValue(s, ctx, func() (sql.NullInt64, error) {
		var v sql.NullInt64
		err := s.db.QueryRowContext(ctx, s.q(flowNextFreeSQL), queue, now, kinds).Scan(&v)
		if err != nil {
			return v, err
		}
		// A rate's window lets one more start in Per after its earliest
		// start.
		var rate sql.NullInt64
		err = s.db.QueryRowContext(ctx, s.q(`SELECT min(f.at + r.per) FROM lq_queues q
			CROSS JOIN LATERAL (VALUES (q.rate_n, q.rate_per), (q.key_rate_n, q.key_rate_per)) AS r(n, per)
			CROSS JOIN LATERAL (SELECT min(at) AS at FROM lq_flow_starts WHERE queue = $1 AND at > $2 - r.per) f
			WHERE q.queue = $1 AND r.n > 0`), queue, now).Scan(&rate)
		if rate.Valid && (!v.Valid || rate.Int64 < v.Int64) {
			v = rate
		}
		return v, err
	})
	return v.Int64, v.Valid, err
}

// claimLimited is Claim for a claim whose ClaimQuery is Limited: one
// transaction that takes the pause lock, locks the queue's settings row,
// reads its limits (none: the usual claim), counts what runs and claims no
// more than the limits allow, marking the rows it starts.
func (s *pgStore) claimLimited(ctx context.Context, q store.ClaimQuery, handOff func([]store.Claimed)) (int, error) {
	var claimed []store.Claimed
	o := &op{ctx: ctx, run: func(ctx context.Context) error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			claimed, err = s.claimLimitedTx(ctx, tx, q)
			return err
		})
	}}
	o.after = func() {
		if handOff != nil {
			handOff(claimed)
		}
	}
	if err := s.claims.submit(o); err != nil {
		return 0, err
	}
	return len(claimed), nil
}

// claimLimitedTx claims per the limited q on tx.
func (s *pgStore) claimLimitedTx(ctx context.Context, tx *sql.Tx, q store.ClaimQuery) ([]store.Claimed, error) {
	if _, err := tx.ExecContext(ctx, pauseLockSQL, s.schema, q.Queue); err != nil {
		return nil, err
	}
	var l store.Limits
	var paused bool
	err := tx.QueryRowContext(ctx, s.q(`SELECT `+limitsCols+`, paused_at IS NOT NULL FROM lq_queues WHERE queue = $1 FOR UPDATE`), q.Queue).
		Scan(&l.Concurrency, &l.KeyConcurrency, &l.Ordered, &l.RateN, &l.RatePer, &l.KeyRateN, &l.KeyRatePer, &paused)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !l.Any()) {
		return s.claimTx(ctx, tx, q)
	}
	if err != nil || paused {
		return nil, err
	}
	if l.RateN == 0 && l.KeyRateN == 0 {
		// Only claims are written: the transaction commits without
		// waiting for its WAL flush, as a batch of unlimited claims does
		// (asyncCommit). A claim a server crash loses leaves its jobs
		// pending and their slots free, as if it never ran. A claim of a
		// rate-limited queue waits for its flush: its stored starts are
		// the window's record.
		if _, err := tx.ExecContext(ctx, asyncCommitSQL); err != nil {
			return nil, err
		}
	}
	total, byGroup, err := s.flowRunning(ctx, tx, q.Queue, q.Now)
	if err != nil {
		return nil, err
	}
	if l.Concurrency > 0 {
		q.N = min(q.N, l.Concurrency-total)
	}
	starts := map[string]int{}
	if l.RateN > 0 || l.KeyRateN > 0 {
		n, err := s.rateStarts(ctx, tx, q.Queue, l, q.Now, starts)
		if err != nil {
			return nil, err
		}
		if l.RateN > 0 {
			q.N = min(q.N, l.RateN-n)
		}
	}
	if q.N <= 0 || len(q.Kinds) == 0 {
		return nil, nil
	}
	var cs []store.Claimed
	groups := map[int64]string{}
	if l.Grouped() {
		cs, err = s.claimByGroupTx(ctx, tx, q, l, store.NewRoom(l, byGroup, starts), groups)
	} else {
		cs, err = s.claimTx(ctx, tx, q)
	}
	if err != nil || len(cs) == 0 {
		return cs, err
	}
	ids := make([]int64, len(cs))
	gs := make([]string, len(cs))
	for i := range cs {
		ids[i], gs[i] = cs[i].ID, groups[cs[i].ID]
	}
	if !l.Grouped() { // claimByGroupTx marks the rows it claims itself
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE lq_jobs SET flow = 1 WHERE id = ANY ($1)`), ids); err != nil {
			return nil, err
		}
	}
	if l.RateN > 0 || l.KeyRateN > 0 {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_flow_starts (queue, grp, at, id)
			SELECT $1, g, $2, i FROM unnest($3::text[], $4::bigint[]) AS u(g, i)`), q.Queue, q.Now, gs, ids); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// rateStarts deletes the starts of queue older than l's longest window at
// now, and returns how many started in the window of l.RatePer, filling
// byGroup with the starts of each group in the window of l.KeyRatePer:
// ranges of lq_flow_starts' primary key.
func (s *pgStore) rateStarts(ctx context.Context, tx *sql.Tx, queue string, l store.Limits, now int64, byGroup map[string]int) (int, error) {
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM lq_flow_starts WHERE queue = $1 AND at <= $2`), queue, now-window(l)-pruneMargin); err != nil {
		return 0, err
	}
	var n int
	if l.RateN > 0 {
		if err := tx.QueryRowContext(ctx, s.q(`SELECT count(*) FROM lq_flow_starts WHERE queue = $1 AND at > $2`), queue, now-l.RatePer).Scan(&n); err != nil {
			return 0, err
		}
	}
	if l.KeyRateN > 0 {
		rows, err := tx.QueryContext(ctx, s.q(`SELECT grp, count(*) FROM lq_flow_starts WHERE queue = $1 AND at > $2 AND grp <> '' GROUP BY grp`), queue, now-l.KeyRatePer)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var g string
			var c int
			if err := rows.Scan(&g, &c); err != nil {
				return 0, err
			}
			byGroup[g] = c
		}
		return n, rows.Err()
	}
	return n, nil
}

// pruneMargin keeps starts this long past the longest window: a claim
// whose time was read before it waited for the lock counts its window
// from that earlier time, and must still find the starts in it that a
// later claim could have pruned.
const pruneMargin = int64(time.Minute)

// window is the longest window of l's rates, in nanoseconds.
func window(l store.Limits) int64 {
	var w int64
	if l.RateN > 0 {
		w = l.RatePer
	}
	if l.KeyRateN > 0 {
		w = max(w, l.KeyRatePer)
	}
	return w
}

// flowRunning counts the running rows of queue that a limited claim
// started and whose lease has not lapsed at now, in all and per group: a
// range of lq_jobs_flow, which holds no other rows.
func (s *pgStore) flowRunning(ctx context.Context, tx *sql.Tx, queue string, now int64) (int, map[string]int, error) {
	rows, err := tx.QueryContext(ctx, s.q(flowRunningSQL), queue, now)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	total, byGroup := 0, map[string]int{}
	for rows.Next() {
		var g sql.NullString
		var n int
		if err := rows.Scan(&g, &n); err != nil {
			return 0, nil, err
		}
		total += n
		if g.Valid {
			byGroup[g.String] = n
		}
	}
	return total, byGroup, rows.Err()
}

// dueGroupSQL reads a page of at most $8 due rows of one priority $2 and
// kind $3 of queue $1 at $4, in claim order after the row ($6, $7)
// (visible_at, id), with their groups, leaving out those of the saturated
// groups $5 inside the server: a range of lq_jobs_kind_due (the row
// comparison is its bound), read a page at a time until the claim has what
// it takes.
const dueGroupSQL = `SELECT id, grp, visible_at FROM lq_jobs
	WHERE queue = $1 AND state IN (0, 1) AND priority = $2 AND kind = $3 AND visible_at <= $4
	  AND (visible_at, id) > ($6, $7)
	  AND (grp IS NULL OR grp NOT IN (SELECT unnest($5::text[])))
	ORDER BY visible_at, id LIMIT $8`

// dueOrderedSQL is dueGroupSQL for ordered groups: a row of a group is
// taken only when it is the group's first live row (lq_jobs_group_live),
// so a group's jobs start one at a time in id order, and a pending job
// waiting for its retry (or snoozed) holds the later ones back until it
// ran, died or was cancelled.
const dueOrderedSQL = `SELECT id, grp, visible_at FROM lq_jobs j
	WHERE queue = $1 AND state IN (0, 1) AND priority = $2 AND kind = $3 AND visible_at <= $4
	  AND (visible_at, id) > ($6, $7)
	  AND (grp IS NULL OR (grp NOT IN (SELECT unnest($5::text[]))
	    AND id = (SELECT min(h.id) FROM lq_jobs h WHERE h.queue = $1 AND h.grp = j.grp AND h.state IN (0, 1))))
	ORDER BY visible_at, id LIMIT $8`

// flowPrioritiesSQL is the distinct priorities of queue $1's live rows,
// most urgent first: priorityWalk, one seek of lq_jobs_kind_due each, read
// in one round trip at the start of a group-limited claim (a seek per
// priority as the claim went on cost a round trip more per claim, the one
// that found no further priority).
var flowPrioritiesSQL = priorityWalk("") + `
SELECT prio FROM p`

// claimChosenSQL claims the rows $4 a group-limited claim chose, leaving
// alone those a claim of a process that has not yet seen the limits took
// meanwhile (due no more), and marks them as started by a limited claim
// (flow): one seek of the primary key per id. Its test of state and due
// time is wrapped in IS TRUE so that no index can serve it: bare, with
// statistics taken while the queue held few live rows, the planner ANDed
// the ids with a scan of every live row's entry in lq_jobs_kind_due for
// "visible_at <= $3", on every claim.
const claimChosenSQL = `UPDATE lq_jobs j
SET state = 1, visible_at = $1, lease = $2, attempt = j.attempt + 1, attempted_at = $3, due_at = j.visible_at, process = $5, flow = 1,
    last_error = CASE WHEN j.state = 1
        THEN 'lease expired: the worker of attempt ' || j.attempt || ' was lost' ELSE j.last_error END
WHERE j.id = ANY ($4) AND (j.state IN (0, 1) AND j.visible_at <= $3) IS TRUE
RETURNING j.id, j.kind, j.attempt, j.priority, j.payload, j.idem_key, j.created_at, j.last_error, j.due_at, j.meta::text`

// candidate is a due row a group-limited claim may take.
type candidate struct {
	id, due int64
	grp     sql.NullString
}

// claimByGroupTx claims up to q.N due rows, most urgent first, taking a
// row of a group only while fewer than perGroup rows of its group run:
// rows of a saturated group are stepped over, so they never hold back the
// rows of other groups behind them.
func (s *pgStore) claimByGroupTx(ctx context.Context, tx *sql.Tx, q store.ClaimQuery, l store.Limits, room store.Room, groups map[int64]string) ([]store.Claimed, error) {
	query := dueGroupSQL
	if l.Ordered {
		query = dueOrderedSQL
	}
	var chosen []int64
	taken := map[string]int{}
	prios, err := s.flowPriorities(ctx, tx, q.Queue)
	if err != nil {
		return nil, err
	}
	for _, prio := range prios {
		if len(chosen) == q.N {
			break
		}
		var all []candidate
		for _, kind := range q.Kinds {
			cands, err := s.groupCandidates(ctx, tx, query, q, prio, kind, room, taken, q.N-len(chosen))
			if err != nil {
				return nil, err
			}
			all = append(all, cands...)
		}
		slices.SortFunc(all, func(a, b candidate) int {
			if a.due != b.due {
				return cmpInt(a.due, b.due)
			}
			return cmpInt(a.id, b.id)
		})
		for _, c := range all {
			if len(chosen) == q.N {
				break
			}
			if c.grp.Valid {
				if room.Of(c.grp.String)-taken[c.grp.String] <= 0 {
					continue
				}
				taken[c.grp.String]++
				groups[c.id] = c.grp.String
			}
			chosen = append(chosen, c.id)
		}
	}
	if len(chosen) == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, s.q(claimChosenSQL),
		q.Until, q.Lease, q.Now, chosen, q.Process)
	if err != nil {
		return nil, err
	}
	return scanClaimed(rows)
}

// flowPriorities reads flowPrioritiesSQL for queue.
func (s *pgStore) flowPriorities(ctx context.Context, tx *sql.Tx, queue string) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, s.q(flowPrioritiesSQL), queue)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// groupCandidates reads up to n due rows of one priority and kind that the
// group limit allows, given what runs and what this claim took already: a
// range of lq_jobs_kind_due read in keyset pages of 2n+16 rows until it has
// them or the range ends.
func (s *pgStore) groupCandidates(ctx context.Context, tx *sql.Tx, query string, q store.ClaimQuery, prio int64, kind string, room store.Room, taken map[string]int, n int) ([]candidate, error) {
	var out []candidate
	mine := map[string]int{}
	saturated := room.Saturated()
	afterDue, afterID := int64(math.MinInt64), int64(math.MinInt64)
	for len(out) < n {
		page := 2*(n-len(out)) + 16
		got, err := func() (int, error) {
			rows, err := tx.QueryContext(ctx, s.q(query), q.Queue, prio, kind, q.Now, saturated, afterDue, afterID, page)
			if err != nil {
				return 0, err
			}
			defer rows.Close()
			got := 0
			for rows.Next() {
				var c candidate
				if err := rows.Scan(&c.id, &c.grp, &c.due); err != nil {
					return 0, err
				}
				got++
				afterDue, afterID = c.due, c.id
				if len(out) == n {
					continue
				}
				if c.grp.Valid && !room.Take(c.grp.String, taken, mine) {
					continue
				}
				out = append(out, c)
			}
			return got, rows.Err()
		}()
		if err != nil {
			return nil, err
		}
		if got < page {
			break
		}
	}
	return out, nil
}

// insertThenClaim is InsertClaim for a limited queue: the job is inserted,
// then claimed for (claimLimited) in a transaction of its own; handOff gets
// what that claim took, the new job marked New.
func (s *pgStore) insertThenClaim(ctx context.Context, job store.NewJob, q store.ClaimQuery, handOff func([]store.Claimed)) (int64, error) {
	ids, dups, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job})
	if err != nil {
		return 0, err
	}
	if dups[0] != nil {
		return ids[0], dups[0]
	}
	_, err = s.claimLimited(ctx, q, func(cs []store.Claimed) {
		store.MarkNew(cs, ids[0])
		if handOff != nil {
			handOff(cs)
		}
	})
	return ids[0], err
}
