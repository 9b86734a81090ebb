package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/litequeue/litequeue/internal/store"
)

func startStore(db *sql.DB, owned, readOnly, asyncAll bool, schema string) *pgStore {
	s := &pgStore{
		db:       db,
		owned:    owned,
		readOnly: readOnly,
		asyncAll: asyncAll,
		schema:   schema,
		channel:  channelName(schema),
		qual:     qualifier(schema),
		qualQ:    map[string]string{},
		log:      slog.New(slog.DiscardHandler),
	}
	s.watchCtx, s.stopWatch = context.WithCancel(context.Background())
	s.claims = newWriter(s, 1)
	s.ins = newWriter(s, 1)
	s.fin = newWriter(s, 1)
	return s
}

// Insert implements store.Runtime.
func (s *pgStore) Insert(ctx context.Context, apptx store.Tx, jobs []store.NewJob) ([]int64, []error, error) {
	tx := apptx.SQL()
	if err := s.writable(); err != nil {
		return nil, nil, err
	}
	if len(jobs) == 0 {
		return nil, nil, nil
	}
	if slowPath(jobs) {
		if tx != nil {
			if err := s.checkTx(ctx, tx); err != nil {
				return nil, nil, err
			}
			return s.insertEach(ctx, tx, jobs)
		}
		var ids []int64
		var dups []error
		o := &op{ctx: ctx, run: func(ctx context.Context) error {
			return s.inTx(ctx, func(tx *sql.Tx) error {
				var err error
				ids, dups, err = s.insertEach(ctx, tx, jobs)
				return err
			})
		}}
		if err := s.ins.submit(o); err != nil {
			return nil, nil, err
		}
		return ids, dups, nil
	}
	if tx != nil {
		return s.insertAppTx(ctx, tx, jobs)
	}
	if len(jobs) >= copyMin && copyable(jobs) {
		var ids []int64
		o := &op{ctx: ctx, run: func(ctx context.Context) error {
			var err error
			ids, err = s.copyJobs(ctx, jobs)
			return err
		}}
		if err := s.ins.submit(o); err != nil {
			return nil, nil, err
		}
		return ids, make([]error, len(jobs)), nil
	}
	o := &op{ctx: ctx, jobs: jobs}
	if err := s.ins.submit(o); err != nil {
		return nil, nil, err
	}
	s.fillHolders(ctx, s.db, o.ids, o.dups)
	return o.ids, o.dups, nil
}

// copyMin is the smallest batch Insert writes with COPY.
const copyMin = 256

// copyable reports whether jobs can be written with COPY: no keys, nothing
// unique, so no conflict can arise.
func copyable(jobs []store.NewJob) bool {
	if slowPath(jobs) {
		return false
	}
	for i := range jobs {
		if jobs[i].Key != "" {
			return false
		}
	}
	return true
}

var copyColumns = []string{"id", "queue", "kind", "priority", "visible_at", "run_at", "created_at", "payload"}

// copyJobs inserts a large batch of jobs without keys in one transaction:
// their ids are drawn from the id sequence in order, then the rows go in
// with binary COPY, and their queues are notified.
func (s *pgStore) copyJobs(ctx context.Context, jobs []store.NewJob) ([]int64, error) {
	ids := make([]int64, 0, len(jobs))
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		rows, err := tx.Query(ctx, `SELECT nextval(pg_get_serial_sequence($1, 'id')) FROM generate_series(1, $2)`,
			quoteIdent(s.schema)+".lq_jobs", len(jobs))
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) != len(jobs) {
			return fmt.Errorf("litequeue: drew %d ids for %d jobs", len(ids), len(jobs))
		}
		slices.Sort(ids)
		n, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, "lq_jobs"}, copyColumns, pgx.CopyFromSlice(len(jobs), func(i int) ([]any, error) {
			j := &jobs[i]
			p := j.Payload
			if p == nil {
				p = []byte{}
			}
			return []any{ids[i], j.Queue, j.Kind, int64(j.Priority), j.VisibleAt, j.VisibleAt, j.CreatedAt, p}, nil
		}))
		if err != nil {
			return err
		}
		if n != int64(len(jobs)) {
			return fmt.Errorf("litequeue: COPY wrote %d rows for %d jobs", n, len(jobs))
		}
		queues := map[string]bool{}
		for i := range jobs {
			if !queues[jobs[i].Queue] {
				queues[jobs[i].Queue] = true
				if _, err := tx.Exec(ctx, notifySQL, s.channel, jobs[i].Queue); err != nil {
					return err
				}
			}
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// insertAppTx is insertTx on an application's transaction, which it first
// checks is on the queue's database (checkTx), in the statement that
// notifies the first job's queue: no round trip of its own.
func (s *pgStore) insertAppTx(ctx context.Context, tx *sql.Tx, jobs []store.NewJob) ([]int64, []error, error) {
	if c := s.lastTx.Load(); c != nil && c.tx == tx {
		return s.insertTx(ctx, tx, jobs)
	}
	var db string
	var n, xid int64
	if err := tx.QueryRowContext(ctx, notifyCheckSQL, s.channel, jobs[0].Queue, s.database).Scan(&db, &n, &xid); err != nil {
		return nil, nil, err
	}
	if err := s.sameDatabase(db); err != nil {
		return nil, nil, err
	}
	s.lastTx.Store(&checkedTx{tx: tx, xid: xid})
	return s.insertTx(ctx, tx, jobs, jobs[0].Queue)
}

// insertTx inserts on a transaction and notifies the jobs' queues (but the
// one notified already, if any); the notifications go out when it commits.
func (s *pgStore) insertTx(ctx context.Context, tx *sql.Tx, jobs []store.NewJob, notified ...string) ([]int64, []error, error) {
	rows, err := tx.QueryContext(ctx, s.q(insertSQL), insertArgs(jobs)...)
	if err != nil {
		return nil, nil, err
	}
	var got []insRow
	for rows.Next() {
		var r insRow
		var key sql.NullString
		if err := rows.Scan(&r.id, &key, &r.inserted); err != nil {
			rows.Close()
			return nil, nil, err
		}
		r.key = key.String
		got = append(got, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	ids, dups, err := mapInsert(jobs, got)
	if err != nil {
		return nil, nil, err
	}
	queues := map[string]bool{}
	for _, q := range notified {
		queues[q] = true
	}
	for _, j := range jobs {
		if !queues[j.Queue] {
			queues[j.Queue] = true
			if _, err := tx.ExecContext(ctx, notifySQL, s.channel, j.Queue); err != nil {
				return nil, nil, err
			}
		}
	}
	s.fillHolders(ctx, tx, ids, dups)
	return ids, dups, nil
}

// claimInto queues the claim of q on b; the claimed jobs land in *out.
func (s *pgStore) claimInto(b *pgx.Batch, q store.ClaimQuery, out *[]store.Claimed) {
	kinds := q.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	b.Queue(pauseLockSQL, s.schema, q.Queue)
	b.Queue(s.q(claimSQL), q.Queue, kinds, q.N, q.Now, q.Until, q.Lease, q.Process).Query(func(rows pgx.Rows) error {
		if c := min(q.N, 64); cap(*out) < c {
			*out = make([]store.Claimed, 0, c)
		}
		*out = (*out)[:0]
		// One set of scan targets for every row: a claim returns hundreds.
		var c store.Claimed
		var key, lastErr, meta *string
		var due *int64
		dest := []any{&c.ID, &c.Kind, &c.Attempt, &c.Priority, &c.Payload, &key, &c.CreatedAt, &lastErr, &due, &meta}
		for rows.Next() {
			// Zeroed, so that nothing of the last row carries over (pgx
			// gives Payload a new slice; the zeroing keeps that true of any
			// driver that would reuse one).
			c, key, lastErr, due, meta = store.Claimed{}, nil, nil, nil, nil
			if err := rows.Scan(dest...); err != nil {
				return localError{err}
			}
			if key != nil {
				c.Key = *key
			}
			if lastErr != nil {
				c.LastError = *lastErr
			}
			if due != nil {
				c.DueAt = *due
			}
			if meta != nil {
				c.Meta = *meta
			}
			*out = append(*out, c)
		}
		sortClaimed(*out)
		return rows.Err()
	})
}

// sortClaimed puts claimed jobs in the order they are to run — priority,
// then the time each became due, then id — which an UPDATE's RETURNING does
// not promise.
func sortClaimed(cs []store.Claimed) {
	slices.SortFunc(cs, func(a, b store.Claimed) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.DueAt, b.DueAt), cmp.Compare(a.ID, b.ID))
	})
}

// claimTx claims per q on an application-style transaction.
func (s *pgStore) claimTx(ctx context.Context, tx *sql.Tx, q store.ClaimQuery) ([]store.Claimed, error) {
	if q.N <= 0 {
		return nil, nil
	}
	kinds := q.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	if _, err := tx.ExecContext(ctx, pauseLockSQL, s.schema, q.Queue); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, s.q(claimSQL), q.Queue, kinds, q.N, q.Now, q.Until, q.Lease, q.Process)
	if err != nil {
		return nil, err
	}
	return scanClaimed(rows)
}

// scanClaimed reads the rows a claim statement returned (id, kind, attempt,
// priority, payload, idem_key, created_at, last_error, due_at, meta), in
// claim order, and closes them.
func scanClaimed(rows *sql.Rows) ([]store.Claimed, error) {
	defer rows.Close()
	var out []store.Claimed
	for rows.Next() {
		var c store.Claimed
		var key, lastErr, meta sql.NullString
		var due sql.NullInt64
		if err := rows.Scan(&c.ID, &c.Kind, &c.Attempt, &c.Priority, &c.Payload, &key, &c.CreatedAt, &lastErr, &due, &meta); err != nil {
			return nil, err
		}
		c.Key, c.LastError, c.DueAt, c.Meta = key.String, lastErr.String, due.Int64, meta.String
		out = append(out, c)
	}
	sortClaimed(out)
	return out, rows.Err()
}

// InsertClaim implements store.Runtime.
func (s *pgStore) InsertClaim(ctx context.Context, job store.NewJob, q store.ClaimQuery, handOff func([]store.Claimed)) (int64, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	if q.Limited {
		// A limited queue's claim has a transaction of its own (limits.go).
		return s.insertThenClaim(ctx, job, q, handOff)
	}
	if q.N == 1 && job.Key == "" && job.Queue == q.Queue && job.VisibleAt <= q.Now &&
		slices.Contains(q.Kinds, job.Kind) && !slowPath([]store.NewJob{job}) {
		return s.insertClaimNew(ctx, job, q, handOff)
	}
	var claimed []store.Claimed
	o := &op{ctx: ctx, jobs: []store.NewJob{job}}
	if q.N > 0 {
		o.add = func(b *pgx.Batch) { s.claimInto(b, q, &claimed) }
	}
	if slowPath(o.jobs) {
		var id int64
		var dupErr error
		o = &op{ctx: ctx, run: func(ctx context.Context) error {
			return s.inTx(ctx, func(tx *sql.Tx) error {
				ids, dups, err := s.insertEach(ctx, tx, []store.NewJob{job})
				if err != nil {
					return err
				}
				id, dupErr = ids[0], dups[0]
				claimed, err = s.claimTx(ctx, tx, q)
				return err
			})
		}}
		o.after = func() {
			if dupErr == nil {
				store.MarkNew(claimed, id)
			}
			if handOff != nil {
				handOff(claimed)
			}
		}
		if err := s.claims.submit(o); err != nil {
			return 0, err
		}
		return id, dupErr
	}
	o.after = func() {
		if len(o.ids) == 1 && o.dups[0] == nil {
			store.MarkNew(claimed, o.ids[0])
		}
		if handOff != nil {
			handOff(claimed)
		}
	}
	if err := s.claims.submit(o); err != nil {
		return 0, err
	}
	s.fillHolders(ctx, s.db, o.ids, o.dups)
	return o.ids[0], o.dups[0]
}

// insertClaimNew is InsertClaim of a job without a key, due now, that the
// claim of one job could take: one statement inserts it and, when nothing
// is due before it, claims it (insertClaimNewSQL), in one round trip and one
// transaction after the pause lock. When something comes first it claims
// nothing — the job waits, its queue notified, and the caller's dispatcher,
// which Enqueue wakes when nothing was handed off, claims in priority order:
// the walk over the priorities would cost every hand-off a statement, and
// an idle worker's enqueue is the latency that matters.
func (s *pgStore) insertClaimNew(ctx context.Context, job store.NewJob, q store.ClaimQuery, handOff func([]store.Claimed)) (int64, error) {
	var id int64
	var took bool
	payload := job.Payload
	if payload == nil {
		payload = []byte{}
	}
	o := &op{ctx: ctx, add: func(b *pgx.Batch) {
		id, took = 0, false
		b.Queue(pauseLockSQL, s.schema, q.Queue)
		b.Queue(s.q(insertClaimNewSQL), job.Queue, job.Kind, int64(job.Priority), job.VisibleAt, job.CreatedAt, payload,
			q.Until, q.Lease, q.Now, s.channel, q.Kinds, q.Process).QueryRow(func(row pgx.Row) error {
			return row.Scan(&id, &took)
		})
	}}
	o.after = func() {
		var claimed []store.Claimed
		if took {
			// A fresh row: its first attempt, due at its VisibleAt.
			claimed = []store.Claimed{{ID: id, Kind: job.Kind, Attempt: 1, Priority: job.Priority, Payload: payload,
				CreatedAt: job.CreatedAt, DueAt: job.VisibleAt, New: true}}
		}
		if handOff != nil {
			handOff(claimed)
		}
	}
	if err := s.claims.submit(o); err != nil {
		return 0, err
	}
	return id, nil
}

// Claim implements store.Runtime.
func (s *pgStore) Claim(ctx context.Context, q store.ClaimQuery, handOff func([]store.Claimed)) (int, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	if q.N <= 0 {
		return 0, nil
	}
	if q.Limited {
		return s.claimLimited(ctx, q, handOff)
	}
	var claimed []store.Claimed
	o := &op{ctx: ctx, add: func(b *pgx.Batch) { s.claimInto(b, q, &claimed) }, claimOnly: true}
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

// NextDue implements store.Runtime.
func (s *pgStore) NextDue(ctx context.Context, queue string, kinds []string, _ string) (int64, bool, error) {
	if kinds == nil {
		kinds = []string{}
	}
	due, err := readValue(s, ctx, func() (sql.NullInt64, error) {
		var due sql.NullInt64
		err := s.db.QueryRowContext(ctx, s.q(nextDueSQL), queue, kinds).Scan(&due)
		return due, err
	})
	return due.Int64, due.Valid, err
}

func leaseArrays(leases []store.Lease) (ids, ls []int64) {
	ids, ls = make([]int64, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		ids[i], ls[i] = l.ID, l.Lease
	}
	return ids, ls
}

// Extend implements store.Runtime.
func (s *pgStore) Extend(ctx context.Context, leases []store.Lease, until int64) ([]int, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, nil
	}
	ids, ls := leaseArrays(leases)
	kept := map[int64]bool{}
	o := &op{ctx: ctx, add: func(b *pgx.Batch) {
		b.Queue(s.q(extendSQL), until, ids, ls).Query(func(rows pgx.Rows) error {
			clear(kept)
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return localError{err}
				}
				kept[id] = true
			}
			return rows.Err()
		})
	}}
	if err := s.fin.submit(o); err != nil {
		return nil, err
	}
	var lost []int
	for i, l := range leases {
		if !kept[l.ID] {
			lost = append(lost, i)
		}
	}
	return lost, nil
}

// Release implements store.Runtime.
func (s *pgStore) Release(ctx context.Context, leases []store.Lease, now int64) error {
	if err := s.writable(); err != nil {
		return err
	}
	if len(leases) == 0 {
		return nil
	}
	ids, ls := leaseArrays(leases)
	o := &op{ctx: ctx, add: func(b *pgx.Batch) {
		b.Queue(s.q(`WITH r AS (`+releaseSQL+`) SELECT pg_notify($4, q) FROM (SELECT DISTINCT queue AS q FROM r) d`), now, ids, ls, s.channel)
	}}
	return s.fin.submit(o)
}

// Complete implements store.Runtime.
func (s *pgStore) Complete(c store.Completion) {
	if s.closed.Load() {
		if c.Notify != nil {
			c.Notify(store.ErrClosed)
		}
		return
	}
	s.fin.complete(c)
}

// Flush implements store.Runtime.
func (s *pgStore) Flush(ctx context.Context) error {
	if s.closed.Load() {
		return nil
	}
	err := s.fin.submit(&op{ctx: ctx})
	if errors.Is(err, store.ErrClosed) {
		return nil
	}
	return err
}

// CompleteTx implements store.Runtime.
//
// The statement changes nothing on another database than the queue's (a
// row there may have the same id and lease) and answers which database it
// ran on, so that such a transaction gets ErrOtherDatabase.
func (s *pgStore) CompleteTx(ctx context.Context, apptx store.Tx, l store.Lease, keepAt int64) error {
	tx := apptx.SQL()
	flow, err := s.flowOf(ctx, tx, l.ID)
	if err != nil {
		return err
	}
	if flow != 0 {
		if err := s.checkTx(ctx, tx); err != nil {
			return err
		}
		if err := s.completeTxFlow(ctx, tx, l, keepAt, flow); err != nil || flow&store.FlowParent != 0 {
			return err
		}
		// A dependant only when flowOf read it: see below.
		_, err := tx.ExecContext(ctx, s.q(flowSucceededSQL), []int64{l.ID}, []int64{keepAt}, s.channel)
		return missingTables(err)
	}
	var n int64
	var db string
	if keepAt != 0 {
		err = tx.QueryRowContext(ctx, s.q(completeTxKeepSQL), keepAt, l.ID, l.Lease, s.database).Scan(&n, &db)
	} else {
		err = tx.QueryRowContext(ctx, s.q(completeTxDeleteSQL), l.ID, l.Lease, s.database).Scan(&n, &db)
	}
	if err != nil {
		return missingTables(err)
	}
	if err := s.sameDatabase(db); err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("litequeue: complete job %d: %w", l.ID, store.ErrLeaseLost)
	}
	// flowOf ran before the row was locked: an edge to this job committed
	// since (Workflow.NeedsJob) is found now, after the lock (as
	// completeTxFlow, at keepAt: 0 leaves the children's own due times).
	if _, err := tx.ExecContext(ctx, s.q(flowSucceededSQL), []int64{l.ID}, []int64{keepAt}, s.channel); err != nil {
		return missingTables(err)
	}
	return nil
}

// Holds implements store.Runtime.
func (s *pgStore) Holds(ctx context.Context, l store.Lease) (bool, error) {
	return readValue(s, ctx, func() (bool, error) {
		var held bool
		err := s.db.QueryRowContext(ctx, s.q(holdsSQL), l.ID, l.Lease).Scan(&held)
		return held, err
	})
}

// Retry implements store.Runtime.
func (s *pgStore) Retry(ctx context.Context, r store.Retry) error {
	if err := s.writable(); err != nil {
		return err
	}
	var lost bool
	o := &op{ctx: ctx, add: func(b *pgx.Batch) {
		b.Queue(s.q(retrySQL),
			r.Due, r.LastError, r.ID, r.Lease.Lease,
			r.Record.Attempt, r.Record.StartedAt, r.Record.FinishedAt, r.Record.Error, r.Record.Decision, r.Record.Delay,
			s.channel, r.Record.Process, r.Record.Host, int64(r.Record.PID)).Exec(func(ct pgconn.CommandTag) error {
			lost = ct.RowsAffected() != 1
			return nil
		})
	}}
	if err := s.fin.submit(o); err != nil {
		return err
	}
	if lost {
		return fmt.Errorf("litequeue: retry job %d: %w", r.ID, store.ErrLeaseLost)
	}
	return nil
}

// Bury implements store.Runtime.
func (s *pgStore) Bury(ctx context.Context, bu store.Burial) error {
	if err := s.writable(); err != nil {
		return err
	}
	var lost bool
	var followID int64
	var setErr bool
	var lastErr string
	if bu.LastError != nil {
		setErr, lastErr = true, *bu.LastError
	}
	if bu.FollowUp != nil && slowPath([]store.NewJob{*bu.FollowUp}) {
		return s.buryThenFollow(ctx, bu, setErr, lastErr)
	}
	var f store.NewJob
	if bu.FollowUp != nil {
		f = *bu.FollowUp
	}
	if f.Payload == nil {
		f.Payload = []byte{}
	}
	o := &op{ctx: ctx, add: func(b *pgx.Batch) {
		b.Queue(s.q(burySQL),
			bu.At, bu.Reason, setErr, lastErr, bu.Attempt, bu.ID, bu.Lease.Lease,
			bu.Record.Attempt, bu.Record.StartedAt, bu.Record.FinishedAt, buryRecordError(bu), bu.Record.Decision, bu.Record.Delay,
			bu.FollowUp != nil, f.Queue, f.Kind, int64(f.Priority), f.VisibleAt, f.CreatedAt, f.Payload, f.Key,
			bu.Record.Process, bu.Record.Host, int64(bu.Record.PID),
		).QueryRow(func(row pgx.Row) error {
			var a int64
			if err := row.Scan(&a, &followID); err != nil {
				return err
			}
			lost = a != 1
			return nil
		})
		if bu.FollowUp != nil {
			b.Queue(notifySQL, s.channel, f.Queue)
		}
		b.Queue(s.q(flowBuriedSQL), bu.ID, bu.At, s.channel)
	}}
	if err := s.fin.submit(o); err != nil {
		return err
	}
	if lost {
		return fmt.Errorf("litequeue: bury job %d: %w", bu.ID, store.ErrLeaseLost)
	}
	if bu.FollowUpID != nil {
		*bu.FollowUpID = followID
	}
	return nil
}

// buryThenFollow is Bury whose follow-up must be inserted the slow way: the
// burial, then (if it happened) the follow-up, in one transaction; a
// follow-up that is a duplicate is not inserted and not an error.
func (s *pgStore) buryThenFollow(ctx context.Context, bu store.Burial, setErr bool, lastErr string) error {
	var lost bool
	var followID int64
	o := &op{ctx: ctx, run: func(ctx context.Context) error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			followID = 0
			var a, fl int64
			err := tx.QueryRowContext(ctx, s.q(burySQL),
				bu.At, bu.Reason, setErr, lastErr, bu.Attempt, bu.ID, bu.Lease.Lease,
				bu.Record.Attempt, bu.Record.StartedAt, bu.Record.FinishedAt, buryRecordError(bu), bu.Record.Decision, bu.Record.Delay,
				false, "", "", int64(0), int64(0), int64(0), []byte{}, "",
				bu.Record.Process, bu.Record.Host, int64(bu.Record.PID)).Scan(&a, &fl)
			if err != nil {
				return err
			}
			if lost = a != 1; lost {
				return nil
			}
			if _, err := tx.ExecContext(ctx, s.q(flowBuriedSQL), bu.ID, bu.At, s.channel); err != nil {
				return err
			}
			ids, dups, err := s.insertEach(ctx, tx, []store.NewJob{*bu.FollowUp})
			switch {
			case err != nil:
			case dups[0] == nil:
				followID = ids[0]
			case !errors.Is(dups[0], store.ErrDuplicate):
				err = dups[0]
			}
			return err
		})
	}}
	if err := s.fin.submit(o); err != nil {
		return err
	}
	if lost {
		return fmt.Errorf("litequeue: bury job %d: %w", bu.ID, store.ErrLeaseLost)
	}
	if bu.FollowUpID != nil {
		*bu.FollowUpID = followID
	}
	return nil
}

// OldestCompleted implements store.Admin.
func (s *pgStore) OldestCompleted(ctx context.Context) (int64, bool, error) {
	at, err := readValue(s, ctx, func() (sql.NullInt64, error) {
		var at sql.NullInt64
		err := s.db.QueryRowContext(ctx, s.q(oldestCompletedSQL)).Scan(&at)
		return at, err
	})
	return at.Int64, at.Valid, err
}

// PurgeCompleted implements store.Admin.
func (s *pgStore) PurgeCompleted(ctx context.Context, before int64) (int, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	var n int
	err := s.db.QueryRowContext(ctx, s.q(purgeCompletedSQL), before).Scan(&n)
	return n, err
}

// Close implements store.Backend.
func (s *pgStore) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.claims.close()
		s.ins.close()
		s.fin.close()
		s.stopWatch()
		s.watchers.Wait()
		if s.owned {
			s.closeErr = s.db.Close()
		}
	})
	return s.closeErr
}
