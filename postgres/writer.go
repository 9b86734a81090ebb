package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/litequeue/litequeue/internal/groupcommit"
	"github.com/litequeue/litequeue/internal/store"
)

// op is one unit of work for the writer. Its statements join the writer's
// next batch, which is sent in one round trip and runs as one implicit
// transaction (group commit, internal/groupcommit): concurrent enqueues,
// claims, failures and successes share a commit instead of each paying one.
type op struct {
	ctx context.Context
	// jobs, when set, are inserted by the batch's one merged insert, before
	// any op's own statements; ids and dups receive the results.
	jobs []store.NewJob
	ids  []int64
	dups []error
	// add queues the op's own statements; their callbacks record the
	// results. It may run more than once (a batch is re-sent after a
	// connection loss), so it must reset what it records.
	add func(b *pgx.Batch)
	// run, when set, replaces jobs and add: the op runs alone, on the
	// writer goroutine after the batch it came with, as a transaction of its
	// own (for work whose statements depend on each other's answers). Its
	// after runs once it returned nil.
	run func(ctx context.Context) error
	// after, when set, runs on the writer once the batch committed, before
	// any later batch: claims hand off their jobs in commit order this way.
	after func()
	// claimOnly marks an op that only claims jobs already stored. A batch
	// of nothing else commits without waiting for its WAL to reach disk
	// (asyncCommit).
	claimOnly bool
}

// asyncCommit reports whether a batch of ops and cs may commit without
// waiting for the WAL flush: when it only claims. A claim holds no work that
// a caller was told is stored, and a server that crashes before flushing it
// loses only the claim itself: its jobs are pending again, their attempt
// not counted, as if the claim never ran. It cannot lose a claim and keep a
// later write of the same job, because the WAL reaches disk in order and
// every later write of a claimed job (success, retry, dead letter) waits
// for its own flush. Everything else in the batch — an insert, a success, a
// failure, a lease extension — keeps the connection's durability.
func asyncCommit(ops []*op, cs []store.Completion) bool {
	if len(cs) > 0 || len(ops) == 0 {
		return false
	}
	for _, o := range ops {
		if !o.claimOnly || o.run != nil || len(o.jobs) > 0 {
			return false
		}
	}
	return true
}

// gop is an op as the group-commit loop carries it.
type gop = groupcommit.Op[*op]

// maxGroup bounds how many ops share one batch.
const maxGroup = 256

// maxGather bounds how long a batch waits for the callers of the last one
// to submit again.
const maxGather = 200 * time.Microsecond

// writer owns a share of the store's writes: batches sent one round trip
// each, parallel of them at a time (with one, batches commit, and run their
// after funcs, in order).
type writer struct {
	s  *pgStore
	gc *groupcommit.Writer[*op]
}

func newWriter(s *pgStore, parallel int) *writer {
	w := &writer{s: s}
	w.gc = groupcommit.New(groupcommit.Options{MaxGroup: maxGroup, Slots: parallel, Gather: maxGather}, w.commit)
	return w
}

// submit hands o to the writer and waits for its batch.
func (w *writer) submit(o *op) error { return w.gc.Submit(&gop{Ctx: o.ctx, Work: o}) }

// complete queues a success for the next batch without waiting.
func (w *writer) complete(c store.Completion) { w.gc.Complete(c) }

// close writes what is queued, then stops the writer.
func (w *writer) close() { w.gc.Close() }

// commit sends ops and the waiting completions as one batch. A batch that
// fails on an SQL error (which rolled it back) is split: each op, and the
// completions, then run in a batch of their own, so one op's failure is
// reported to it alone.
func (w *writer) commit(all []*gop, cs []store.Completion) {
	ops := make([]*op, 0, len(all))
	var batched, alone []*gop
	for _, o := range all {
		switch {
		case o.Ctx.Err() != nil:
			o.Err = o.Ctx.Err()
		case o.Work.run != nil:
			alone = append(alone, o)
		default:
			ops = append(ops, o.Work)
			batched = append(batched, o)
		}
	}
	defer func() {
		for _, o := range alone {
			err := o.Ctx.Err()
			if err == nil {
				err = o.Work.run(o.Ctx)
			}
			if err == nil && o.Work.after != nil {
				o.Work.after()
			}
			o.Err = err
		}
	}()
	if len(ops) == 0 && len(cs) == 0 {
		return
	}
	results, err := w.send(ops, cs)
	var sqlErr *pgconn.PgError
	if err != nil && errors.As(err, &sqlErr) && !transient(err) && len(ops)+min(len(cs), 1) > 1 {
		for i, o := range ops {
			_, e := w.send([]*op{o}, nil)
			w.finish(batched[i:i+1], nil, nil, e)
		}
		if len(cs) > 0 {
			results, err = w.send(nil, cs)
			w.finish(nil, cs, results, err)
		}
		return
	}
	w.finish(batched, cs, results, err)
}

// finish reports a batch's outcome: completions first (so that an op that
// waits for them, a Flush, returns after they were notified), then hand-offs
// in order, then the ops.
func (w *writer) finish(ops []*gop, cs []store.Completion, results []error, err error) {
	groupcommit.Notify(cs, results, err)
	if err == nil {
		for _, o := range ops {
			if o.Work.after != nil {
				o.Work.after()
			}
		}
	}
	for _, o := range ops {
		o.Err = err
	}
}

// retry bounds for a batch that failed before it could commit because the
// connection was lost or the server rolled it back (deadlock, serialization).
const (
	sendAttempts = 8
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = time.Second
)

// send runs one batch, re-sending it on a new connection while it failed
// before committing for a reason that a new attempt can cure.
func (w *writer) send(ops []*op, cs []store.Completion) ([]error, error) {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		results, committedUnknown, err := w.sendOnce(ops, cs)
		if err == nil || committedUnknown || !transient(err) || attempt == sendAttempts || w.s.closing() {
			return results, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, maxBackoff)
	}
}

// sendOnce runs the batch on one connection. committedUnknown reports a
// failure after every statement had answered, when the implicit commit may
// have happened: such a batch must not be re-sent.
func (w *writer) sendOnce(ops []*op, cs []store.Completion) (results []error, committedUnknown bool, err error) {
	s := w.s
	ctx := context.Background()
	b := &pgx.Batch{}

	// The completions go first: they were queued before the ops, and a
	// claim of the same batch must find a completed job gone, not take a
	// job whose lease a mock clock (or a stall) let lapse while its success
	// waited here.
	if len(cs) > 0 {
		results = make([]error, len(cs))
		var delIDs, delLeases, keepIDs, keepLeases, keepAt []int64
		var delIdx, keepIdx, flowIdx []int
		for i, c := range cs {
			if c.Flow != 0 {
				// A workflow's job: its own statement (workflow.go).
				flowIdx = append(flowIdx, i)
				continue
			}
			if c.Keep {
				keepIDs, keepLeases, keepAt = append(keepIDs, c.ID), append(keepLeases, c.Lease.Lease), append(keepAt, c.At)
				keepIdx = append(keepIdx, i)
			} else {
				delIDs, delLeases = append(delIDs, c.ID), append(delLeases, c.Lease.Lease)
				delIdx = append(delIdx, i)
			}
		}
		mark := func(idx []int, ids []int64) func(rows pgx.Rows) error {
			return func(rows pgx.Rows) error {
				// The ids written, sorted: a lookup per success without
				// a map for every batch.
				done := make([]int64, 0, len(idx))
				var id int64
				for rows.Next() {
					if err := rows.Scan(&id); err != nil {
						return localError{err}
					}
					done = append(done, id)
				}
				if err := rows.Err(); err != nil {
					return err
				}
				slices.Sort(done)
				for k, i := range idx {
					if _, ok := slices.BinarySearch(done, ids[k]); !ok {
						results[i] = store.ErrLeaseLost
					}
				}
				return nil
			}
		}
		if len(delIDs) > 0 {
			b.Queue(s.q(completeDeleteSQL), delIDs, delLeases).Query(mark(delIdx, delIDs))
		}
		if len(keepIDs) > 0 {
			b.Queue(s.q(completeKeepSQL), keepIDs, keepLeases, keepAt).Query(mark(keepIdx, keepIDs))
		}
		for _, i := range flowIdx {
			c := cs[i]
			var at int64
			if c.Keep {
				at = c.At
			}
			b.Queue(s.q(flowDoneSQL), c.ID, c.Lease.Lease, at, c.At, c.Flow, s.channel).QueryRow(func(row pgx.Row) error {
				var ok bool
				if err := row.Scan(&ok); err != nil {
					return err
				}
				results[i] = nil
				if !ok {
					results[i] = store.ErrLeaseLost
				}
				return nil
			})
		}
	}

	if s.asyncAll || asyncCommit(ops, cs) {
		b.Queue(asyncCommitSQL)
	}
	// The merged insert of every op's jobs.
	var all []store.NewJob
	for _, o := range ops {
		all = append(all, o.jobs...)
	}
	if len(all) > 0 {
		s.queueInsert(b, all, func(ids []int64, dups []error) {
			off := 0
			for _, o := range ops {
				n := len(o.jobs)
				o.ids, o.dups = ids[off:off+n:off+n], dups[off:off+n:off+n]
				off += n
			}
		})
	}
	for _, o := range ops {
		if o.add != nil {
			o.add(b)
		}
	}
	queued := b.Len()
	if queued == 0 {
		return results, false, nil
	}
	// Count the statements that answered: a failure before the last one
	// means the implicit transaction did not commit.
	answered := 0
	for _, qq := range b.QueuedQueries {
		fn := qq.Fn
		qq.Fn = func(br pgx.BatchResults) error {
			if fn == nil {
				if _, err := br.Exec(); err != nil {
					return err
				}
			} else if err := fn(br); err != nil {
				return err
			}
			answered++
			return nil
		}
	}
	if s.onBatch != nil {
		sqls := make([]string, 0, b.Len())
		for _, qq := range b.QueuedQueries {
			sqls = append(sqls, qq.SQL)
		}
		s.onBatch(sqls)
	}
	err = s.withConn(ctx, func(c *pgx.Conn) error {
		return c.SendBatch(ctx, b).Close()
	})
	if err != nil {
		var le localError
		return nil, answered == queued || errors.As(err, &le), err
	}
	return results, false, nil
}

// localError is a failure of the store's own reading of an answer, not of
// the server or the connection: the batch may have committed.
type localError struct{ error }

func (e localError) Unwrap() error { return e.error }

// transient reports an error that a new attempt on a new connection may
// cure: the connection was lost or refused, or the server rolled the
// transaction back for a deadlock or a serialization failure.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var le localError
	if errors.As(err, &le) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001", pe.Code == "40P01", strings.HasPrefix(pe.Code, "08"),
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			return true
		}
		return false
	}
	// Anything else from the driver is about the connection (closed, reset,
	// refused, timed out).
	return true
}

// withConn runs fn on a pgx connection of the pool. A connection whose use
// failed for a non-SQL reason is discarded rather than reused.
func (s *pgStore) withConn(ctx context.Context, fn func(c *pgx.Conn) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var ferr error
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w (%T)", ErrNotPgx, dc)
		}
		ferr = fn(c.Conn())
		var pe *pgconn.PgError
		if ferr != nil && !errors.As(ferr, &pe) {
			return driver.ErrBadConn
		}
		return nil
	})
	if ferr != nil {
		return ferr
	}
	return err
}

// queueInsert queues on b the insert of jobs and a notification of each
// of their queues; done receives, in the jobs' order, their ids and
// duplicates (see mapInsert) once the insert answered. Jobs without keys go
// in with insertKeylessSQL, which has no conflicts to look for; a single one
// with insertOneKeylessSQL, which notifies too.
func (s *pgStore) queueInsert(b *pgx.Batch, jobs []store.NewJob, done func(ids []int64, dups []error)) {
	keyless := true
	for i := range jobs {
		if jobs[i].Key != "" {
			keyless = false
			break
		}
	}
	if keyless && len(jobs) == 1 {
		j := &jobs[0]
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		b.Queue(s.q(insertOneKeylessSQL), j.Queue, j.Kind, int64(j.Priority), j.VisibleAt, j.CreatedAt, payload, s.channel).QueryRow(func(row pgx.Row) error {
			var id int64
			if err := row.Scan(&id); err != nil {
				return err
			}
			done([]int64{id}, []error{nil})
			return nil
		})
		return
	}
	s.queueInsertMany(b, jobs, keyless, done)
	queues := map[string]bool{}
	for _, j := range jobs {
		queues[j.Queue] = true
	}
	for _, q := range slices.Sorted(maps.Keys(queues)) {
		b.Queue(notifySQL, s.channel, q)
	}
}

// queueInsertMany is queueInsert's insert of several jobs, or of one with
// a key.
func (s *pgStore) queueInsertMany(b *pgx.Batch, jobs []store.NewJob, keyless bool, done func(ids []int64, dups []error)) {
	if keyless {
		args := insertArgs(jobs)[:6]
		b.Queue(s.q(insertKeylessSQL), args...).Query(func(rows pgx.Rows) error {
			ids := make([]int64, 0, len(jobs))
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return localError{err}
				}
				ids = append(ids, id)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(ids) != len(jobs) {
				return localError{fmt.Errorf("litequeue: PostgreSQL insert answered %d ids for %d jobs", len(ids), len(jobs))}
			}
			// Ids are drawn in the insert's order (the ORDER BY).
			slices.Sort(ids)
			done(ids, make([]error, len(jobs)))
			return nil
		})
		return
	}
	b.Queue(s.q(insertSQL), insertArgs(jobs)...).Query(func(rows pgx.Rows) error {
		var got []insRow
		for rows.Next() {
			var r insRow
			var key *string
			if err := rows.Scan(&r.id, &key, &r.inserted); err != nil {
				return localError{err}
			}
			if key != nil {
				r.key = *key
			}
			got = append(got, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		ids, dups, err := mapInsert(jobs, got)
		if err != nil {
			return localError{err}
		}
		done(ids, dups)
		return nil
	})
}

// insRow is one row of insertSQL's answer.
type insRow struct {
	id       int64
	key      string
	inserted bool
}

// insertArgs are insertSQL's parallel arrays for jobs.
func insertArgs(jobs []store.NewJob) []any {
	n := len(jobs)
	queues, kinds, keys := make([]string, n), make([]string, n), make([]string, n)
	prios, vis, created := make([]int64, n), make([]int64, n), make([]int64, n)
	payloads := make([][]byte, n)
	for i, j := range jobs {
		queues[i], kinds[i], keys[i] = j.Queue, j.Kind, j.Key
		prios[i], vis[i], created[i] = int64(j.Priority), j.VisibleAt, j.CreatedAt
		payloads[i] = j.Payload
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
	}
	return []any{queues, kinds, prios, vis, created, payloads, keys}
}

// mapInsert matches insertSQL's answer to jobs: ids[i] is the id of jobs[i],
// or, with dups[i] a *DuplicateError, the id of the live job that holds its
// key (0 when that job committed during the statement: the caller looks it
// up).
func mapInsert(jobs []store.NewJob, rows []insRow) ([]int64, []error, error) {
	var inserted []insRow
	holders := map[string]int64{}
	insKeys := map[string]bool{}
	for _, r := range rows {
		if r.inserted {
			inserted = append(inserted, r)
			if r.key != "" {
				insKeys[r.key] = true
			}
		} else {
			holders[r.key] = r.id
		}
	}
	slices.SortFunc(inserted, func(a, b insRow) int { return cmp.Compare(a.id, b.id) })
	ids := make([]int64, len(jobs))
	dups := make([]error, len(jobs))
	seen := map[string]int64{}
	next := 0
	take := func(key string) (int64, error) {
		if next >= len(inserted) || inserted[next].key != key {
			return 0, fmt.Errorf("litequeue: PostgreSQL insert answered %d rows that do not match the batch of %d jobs", len(inserted), len(jobs))
		}
		next++
		return inserted[next-1].id, nil
	}
	for i, j := range jobs {
		if j.Key == "" {
			id, err := take("")
			if err != nil {
				return nil, nil, err
			}
			ids[i] = id
			continue
		}
		if holder, ok := seen[j.Key]; ok {
			ids[i], dups[i] = holder, &store.DuplicateError{Key: j.Key, ID: holder}
			continue
		}
		if insKeys[j.Key] {
			id, err := take(j.Key)
			if err != nil {
				return nil, nil, err
			}
			ids[i], seen[j.Key] = id, id
			continue
		}
		holder := holders[j.Key]
		seen[j.Key] = holder
		ids[i], dups[i] = holder, &store.DuplicateError{Key: j.Key, ID: holder}
	}
	if next != len(inserted) {
		return nil, nil, fmt.Errorf("litequeue: PostgreSQL insert answered %d rows for %d new jobs", len(inserted), next)
	}
	return ids, dups, nil
}

// fillHolders looks up, after the batch, the holders of keys that were taken
// by a job committed while the insert ran (dups with ID 0).
func (s *pgStore) fillHolders(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, ids []int64, dups []error) {
	for i, d := range dups {
		var de *store.DuplicateError
		if errors.As(d, &de) && de.ID == 0 {
			if err := q.QueryRowContext(ctx, s.q(holderSQL), de.Key).Scan(&de.ID); err == nil {
				ids[i] = de.ID
			}
		}
	}
}
