package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// Store is the SQLite store: a read pool, and (unless read-only) one writer
// goroutine owning one connection, which commits every write of the process
// in group commits.
type Store struct {
	opts  Options
	db    *sql.DB // reads (and, from New, the application's pool)
	wdb   *sql.DB // the writer's own pool, from Open
	owned bool    // Open made db and wdb; Close closes them
	wconn *sql.Conn
	w     *writer // nil when read-only
	// noMeta: a file opened read-only at a schema older than metaVersion,
	// whose jobs have no meta column and no tag table (metaColumns).
	noMeta bool
	// noProcs: a file opened read-only at a schema older than
	// procsVersion, without lq_processes or the process columns.
	noProcs bool
	// noFlow: a file opened read-only at a schema older than
	// flowVersion, without limits, groups or lq_flow_starts.
	noFlow bool

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Backend = (*Store)(nil)
	_ store.Testing = (*Store)(nil)
)

func newStore(o Options, db, wdb *sql.DB, owned bool, conn *sql.Conn) *Store {
	s := &Store{opts: o, db: db, wdb: wdb, owned: owned, wconn: conn}
	if conn != nil {
		s.w = newWriter(conn, s.writeCompletions)
	}
	return s
}

// DB returns the store's read pool (the application's db for New).
func (s *Store) DB() *sql.DB { return s.db }

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.w == nil }

// Version reads the schema version the file holds: SchemaVersion unless
// the store was opened read-only on a file of an older schema (which a
// read-only open does not migrate).
func (s *Store) Version(ctx context.Context) (int, error) {
	v, _, err := sqlitefile.Identify(ctx, s.db)
	return v, err
}

// Do runs fn in the writer's next transaction and waits for its commit.
func (s *Store) Do(ctx context.Context, fn func(ctx context.Context, tx Execer) error) error {
	if s.w == nil {
		return store.ErrReadOnly
	}
	return s.w.do(ctx, fn)
}

// Read runs fn on the writer's connection between two commits (on the read
// pool for a read-only store).
func (s *Store) Read(ctx context.Context, fn func(ctx context.Context, tx Execer) error) error {
	if s.w == nil {
		return fn(ctx, s.db)
	}
	return s.w.read(ctx, fn)
}

// Close writes what is queued, stops the writer and closes the handles the
// store opened. A store made by Open (not read-only) checkpoints the WAL into
// the file and truncates it first, so the .db alone holds every job.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.w != nil {
			s.w.close()
		}
		if s.owned {
			// The readers first, so that the writer's connection is the
			// last one this process has on the file.
			errs = append(errs, s.db.Close())
			if s.w != nil {
				errs = append(errs, checkpointOnClose(s.wconn))
			}
		}
		if s.wconn != nil {
			errs = append(errs, s.wconn.Close())
		}
		if s.owned && s.wdb != nil {
			errs = append(errs, s.wdb.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

const insertJobSQL = `INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, idem_key, meta)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

const liveKeySQL = `SELECT id FROM lq_jobs WHERE idem_key = ? AND state IN (0, 1)`

// insertOne writes one job on tx, and its tags (writeTags). With a key
// held by a live job it inserts nothing and returns that job's id and a
// *store.DuplicateError.
func insertOne(ctx context.Context, tx Execer, nj *store.NewJob, stmt *sql.Stmt) (int64, error) {
	id, err := insertRow(ctx, tx, nj, stmt)
	if err == nil && nj.Group != "" {
		_, err = tx.ExecContext(ctx, setGroupSQL, id, nj.Group)
	}
	if err != nil || len(nj.Tags) == 0 {
		return id, err
	}
	return id, writeTags(ctx, tx, id, nj)
}

// insertRow is insertOne without the job's tags.
func insertRow(ctx context.Context, tx Execer, nj *store.NewJob, stmt *sql.Stmt) (int64, error) {
	var key any
	if nj.Key != "" {
		key = nj.Key
		var id int64
		err := tx.QueryRowContext(ctx, liveKeySQL, nj.Key).Scan(&id)
		if err == nil {
			return id, &store.DuplicateError{Key: nj.Key, ID: id}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
	}
	if nj.Unique != nil {
		return insertUnique(ctx, tx, nj, key)
	}
	args := []any{nj.Queue, nj.Kind, nj.Priority, nj.VisibleAt, nj.VisibleAt, nj.CreatedAt, nj.Payload, key, metaArg(nj)}
	var res sql.Result
	var err error
	if stmt != nil {
		res, err = stmt.ExecContext(ctx, args...)
	} else {
		res, err = tx.ExecContext(ctx, insertJobSQL, args...)
	}
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	return id, addCount(ctx, tx, countOf(nj.Queue, store.Pending, nj.VisibleAt), 1)
}

type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// Insert implements store.Runtime.
func (s *Store) Insert(ctx context.Context, tx store.Tx, jobs []store.NewJob) (ids []int64, dups []error, err error) {
	if !tx.IsZero() {
		ids, dups, err = insertBatch(ctx, tx.SQL(), jobs)
		return ids, dups, err
	}
	if s.w == nil {
		return nil, nil, store.ErrReadOnly
	}
	err = s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		ids, dups, err = insertBatch(ctx, tx, jobs)
		return err
	})
	if err != nil {
		return nil, nil, sqlitefile.ClassifyWriteError(err)
	}
	return ids, dups, nil
}

// insertBatch writes jobs on tx. ids[i] is the id of jobs[i]; dups[i] is the
// *DuplicateError of an item whose key a live job (or an earlier item) holds,
// and which was therefore not inserted. err is any other failure: then the
// caller must not commit.
func insertBatch(ctx context.Context, tx Execer, jobs []store.NewJob) (ids []int64, dups []error, err error) {
	var stmt *sql.Stmt
	if p, ok := tx.(preparer); ok && len(jobs) > 1 {
		s, err := p.PrepareContext(ctx, insertJobSQL)
		if err != nil {
			return nil, nil, err
		}
		defer s.Close()
		stmt = s
	}
	// On a caller's transaction the batch's counts are written once, at its
	// end.
	ct, counted := tx.(*countingTx)
	if !counted {
		ct = &countingTx{Execer: tx}
	}
	ids = make([]int64, len(jobs))
	dups = make([]error, len(jobs))
	for i := 0; i < len(jobs); i++ {
		if k := keylessRun(jobs[i:]); k > 1 {
			if err := insertMany(ctx, ct, jobs[i:i+k], ids[i:i+k]); err != nil {
				return nil, nil, fmt.Errorf("batch items %d-%d: %w", i, i+k-1, err)
			}
			i += k - 1
			continue
		}
		id, err := insertOne(ctx, ct, &jobs[i], stmt)
		if errors.Is(err, store.ErrDuplicate) {
			dups[i] = fmt.Errorf("batch item %d: %w", i, err)
		} else if err != nil {
			return nil, nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		ids[i] = id
	}
	if !counted {
		if err := ct.flush(ctx); err != nil {
			return nil, nil, err
		}
	}
	return ids, dups, nil
}

// maxInsertRows is the most rows of one multi-row INSERT (8 parameters each).
const maxInsertRows = 256

// insertManySQL[k] inserts k keyless jobs in one statement, for k a power of
// two up to maxInsertRows: a handful of statement texts, each prepared once.
var insertManySQL = func() map[int]string {
	const row = "(?, ?, ?, ?, ?, ?, ?, NULL, NULL)"
	m := map[int]string{}
	for k := 2; k <= maxInsertRows; k *= 2 {
		m[k] = strings.TrimSuffix(insertJobSQL, "(?, ?, ?, ?, ?, ?, ?, ?, ?)") + strings.Repeat(row+", ", k-1) + row + " RETURNING id"
	}
	return m
}()

// keylessRun returns how many of the leading jobs to insert in one multi-row
// INSERT: the largest power of two, up to maxInsertRows, of leading jobs
// without an idempotency key (a keyed job needs its duplicate check).
func keylessRun(jobs []store.NewJob) int {
	n := 0
	for n < len(jobs) && n < maxInsertRows && jobs[n].Key == "" && jobs[n].Unique == nil && jobs[n].Meta == "" && jobs[n].Group == "" {
		n++
	}
	k := 1
	for k*2 <= n {
		k *= 2
	}
	return k
}

// insertMany writes keyless jobs with one multi-row INSERT and stores their
// ids in ids. AUTOINCREMENT hands out ever larger ids in insertion order, and
// the rows are inserted in VALUES order, so the sorted returned ids are the
// jobs' ids in order.
func insertMany(ctx context.Context, tx Execer, jobs []store.NewJob, ids []int64) error {
	args := make([]any, 0, 7*len(jobs))
	for i := range jobs {
		nj := &jobs[i]
		args = append(args, nj.Queue, nj.Kind, nj.Priority, nj.VisibleAt, nj.VisibleAt, nj.CreatedAt, nj.Payload)
	}
	rows, err := tx.QueryContext(ctx, insertManySQL[len(jobs)], args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if n == len(ids) {
			return fmt.Errorf("litequeue: multi-row insert returned more than %d ids", len(ids))
		}
		if err := rows.Scan(&ids[n]); err != nil {
			return err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(ids) {
		return fmt.Errorf("litequeue: multi-row insert of %d jobs returned %d ids", len(ids), n)
	}
	slices.Sort(ids)
	for i := 0; i < len(jobs); {
		k := i + 1
		key := countOf(jobs[i].Queue, store.Pending, jobs[i].VisibleAt)
		for k < len(jobs) && countOf(jobs[k].Queue, store.Pending, jobs[k].VisibleAt) == key {
			k++
		}
		if err := addCount(ctx, tx, key, k-i); err != nil {
			return err
		}
		i = k
	}
	return nil
}

// InsertClaim implements store.Runtime: the insert and the claim share one
// transaction, and handOff runs on the writer right after its commit, in
// commit order with every other claim.
func (s *Store) InsertClaim(ctx context.Context, job store.NewJob, q store.ClaimQuery, handOff func([]store.Claimed)) (int64, error) {
	if s.w == nil {
		return 0, store.ErrReadOnly
	}
	var id int64
	var claimed []store.Claimed
	err := s.w.doAfter(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		claimed = nil
		id, err = insertOne(ctx, tx, &job, nil)
		if err != nil {
			return err
		}
		if q.Limited {
			claimed, err = claimLimitedTx(ctx, tx, q)
			return err
		}
		if q.N == 1 {
			c, ok, err := claimNew(ctx, tx, q, id, &job)
			if err != nil || ok {
				claimed = c
				return err
			}
		}
		claimed, err = claimTx(ctx, tx, q)
		return err
	}, func() {
		store.MarkNew(claimed, id)
		handOff(claimed)
	})
	var dup *store.DuplicateError
	if errors.As(err, &dup) {
		return dup.ID, err
	}
	var ue *store.UniqueError
	if errors.As(err, &ue) {
		return ue.ID, err
	}
	if err != nil {
		return 0, sqlitefile.ClassifyWriteError(err)
	}
	return id, nil
}

// claimNewSQL claims the row ?4 that its own transaction has just inserted,
// due now at priority ?6 in queue ?5 — but only when nothing could come
// before it: the queue is not paused, no live row of the queue is more
// urgent (one seek of lq_jobs_kind_due for the minimum priority, due or not),
// and no other row of its priority and of a kind of the JSON list ?7 (the
// kinds this process handles) is due (one seek of lq_jobs_kind_due per
// kind). Each condition is an index probe, so the common idle-queue hand-off costs one statement; when a
// condition fails, nothing is claimed and the caller walks the priorities
// with claimSQL, which never overtakes a due job.
const claimNewSQL = `UPDATE lq_jobs
SET state = 1, visible_at = ?1, lease = ?2, attempt = attempt + 1, attempted_at = ?3, due_at = visible_at, process = ?8
WHERE id = ?4 AND state = 0 AND attempt = 0 AND priority = ?6 AND visible_at <= ?3
  AND NOT EXISTS (SELECT 1 FROM lq_queues WHERE queue = ?5 AND paused_at IS NOT NULL)
  AND (SELECT min(priority) FROM lq_jobs WHERE queue = ?5 AND state IN (0, 1)) = ?6
  AND NOT EXISTS (SELECT 1 FROM lq_jobs WHERE queue = ?5 AND state IN (0, 1) AND priority = ?6
    AND kind IN (SELECT value FROM json_each(?7)) AND visible_at <= ?3 AND id <> ?4)`

// claimNew claims the job its transaction has just inserted as id when
// claimNewSQL finds that nothing is due before it; ok is false when it
// claimed nothing. The row is fresh, so its attempt is the first and it
// became due at its VisibleAt: the statement needs no RETURNING.
func claimNew(ctx context.Context, tx Execer, q store.ClaimQuery, id int64, nj *store.NewJob) (c []store.Claimed, ok bool, err error) {
	if !slices.Contains(q.Kinds, nj.Kind) || nj.Queue != q.Queue || nj.VisibleAt > q.Now {
		return nil, false, nil
	}
	ok, err = execHolds(ctx, tx, claimNewSQL, q.Until, q.Lease, q.Now, id, q.Queue, nj.Priority, q.KindsJSON, q.Process)
	if err != nil || !ok {
		return nil, false, err
	}
	if err := moveCount(ctx, tx, countOf(q.Queue, store.Pending, nj.VisibleAt), countOf(q.Queue, store.Running, 0), 1); err != nil {
		return nil, false, err
	}
	return []store.Claimed{{ID: id, Kind: nj.Kind, Attempt: 1, Priority: nj.Priority, Payload: nj.Payload,
		Key: nj.Key, CreatedAt: nj.CreatedAt, DueAt: nj.VisibleAt, Meta: nj.Meta}}, true, nil
}

// claimSQL returns the statement that claims up to ?6 due rows of priority
// ?7 of queue ?4, in due-time order, for the k kinds this process handles
// (parameters ?8 to ?(7+k)). A running row whose lease has lapsed is due
// too: its worker is gone. The claim takes a new lease, moves the visibility
// timestamp to the lease's end, counts the attempt and keeps the time the
// row became due in due_at (SET reads the old visible_at), by which the
// workers take the batch. A lapsed row's new lease ends one nanosecond
// before ?1: the last column returned (visible_at < ?1) tells the counts
// (counts.go) that it was running already, which RETURNING, seeing only the
// new row, could not tell otherwise.
//
// Each kind is one range of lq_jobs_kind_due (queue, priority, kind,
// visible_at) that stops at ?6 rows or at the first row not yet due, and the
// ranges are merged in due order: rows of kinds this process does not
// handle are never read, however many are due. One priority at a time keeps
// each range stoppable (across priorities SQLite could not stop at the
// first row not yet due). The statement texts, one per kind count, are made
// once.
func claimSQL(k int) string {
	claimSQLs.Lock()
	defer claimSQLs.Unlock()
	if q, ok := claimSQLs.m[k]; ok {
		return q
	}
	var b strings.Builder
	b.WriteString(`UPDATE lq_jobs
SET state = 1, visible_at = ?1 - (state = 1), lease = ?2, attempt = attempt + 1, attempted_at = ?3, due_at = visible_at, process = ?5,
    last_error = CASE WHEN state = 1 THEN 'lease expired: the worker of attempt ' || attempt || ' was lost' ELSE last_error END
WHERE id IN (
    SELECT id FROM (`)
	for i := range k {
		if i > 0 {
			b.WriteString("\n        UNION ALL")
		}
		fmt.Fprintf(&b, `
        SELECT id, visible_at FROM (SELECT id, visible_at FROM lq_jobs
            WHERE queue = ?4 AND state IN (0, 1) AND priority = ?7 AND kind = ?%d AND visible_at <= ?3
            ORDER BY visible_at, id LIMIT ?6)`, 8+i)
	}
	b.WriteString(`)
    ORDER BY visible_at, id
    LIMIT ?6)
RETURNING id, kind, attempt, priority, payload, idem_key, created_at, last_error, due_at, meta, visible_at < ?1`)
	claimSQLs.m[k] = b.String()
	return claimSQLs.m[k]
}

// claimSQLs holds claimSQL's statements by kind count.
var claimSQLs = struct {
	sync.Mutex
	m map[int]string
}{m: map[int]string{}}

// nextPrioritySQL finds the most urgent priority of a queue's live rows at or
// after ?2 with one seek of lq_jobs_kind_due — none while the queue is paused
// (lq_queues, see control.go): then claims take nothing and nothing is due,
// without a statement of their own.
const nextPrioritySQL = `SELECT min(priority) FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1) AND priority >= ?2
	AND NOT EXISTS (SELECT 1 FROM lq_queues WHERE queue = ?1 AND paused_at IS NOT NULL)`

// priorities calls fn for each priority of queue's live rows, most urgent
// first, until fn returns false; never while queue is paused. Each step is one index seek, so a claim costs
// O(P log n) for P distinct priorities, not a scan of the backlog.
func priorities(ctx context.Context, tx Execer, queue string, fn func(prio int64) (more bool, err error)) error {
	from := int64(math.MinInt64)
	for {
		var prio sql.NullInt64
		if err := tx.QueryRowContext(ctx, nextPrioritySQL, queue, from).Scan(&prio); err != nil {
			return err
		}
		if !prio.Valid {
			return nil
		}
		more, err := fn(prio.Int64)
		if err != nil || !more || prio.Int64 == math.MaxInt64 {
			return err
		}
		from = prio.Int64 + 1
	}
}

// claimTx claims per q on tx, most urgent first.
func claimTx(ctx context.Context, tx Execer, q store.ClaimQuery) ([]store.Claimed, error) {
	cs := make([]store.Claimed, 0, min(q.N, 64))
	// One set of scan targets for every row: a claim returns hundreds.
	var c store.Claimed
	var key, lastErr, meta sql.NullString
	var lapsed bool
	dest := []any{&c.ID, &c.Kind, &c.Attempt, &c.Priority, &c.Payload, &key, &c.CreatedAt, &lastErr, &c.DueAt, &meta, &lapsed}
	fresh := map[int64]int{} // claimed rows that were pending, by due bucket
	if len(q.Kinds) == 0 {
		return cs, nil
	}
	kindArgs := make([]any, len(q.Kinds))
	for i, k := range q.Kinds {
		kindArgs[i] = k
	}
	err := priorities(ctx, tx, q.Queue, func(prio int64) (bool, error) {
		args := append([]any{q.Until, q.Lease, q.Now, q.Queue, q.Process, q.N - len(cs), prio}, kindArgs...)
		rows, err := tx.QueryContext(ctx, claimSQL(len(q.Kinds)), args...)
		if err != nil {
			return false, err
		}
		defer rows.Close()
		for rows.Next() {
			c = store.Claimed{}
			if err := rows.Scan(dest...); err != nil {
				return false, err
			}
			c.Key, c.LastError, c.Meta = key.String, lastErr.String, meta.String
			cs = append(cs, c)
			if !lapsed {
				fresh[dueBucket(c.DueAt)]++
			}
		}
		return len(cs) < q.N, rows.Err()
	})
	if err != nil {
		return nil, err
	}
	for due, n := range fresh {
		from := countKey{queue: q.Queue, state: store.Pending, due: due}
		if err := moveCount(ctx, tx, from, countOf(q.Queue, store.Running, 0), n); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// Claim implements store.Runtime.
func (s *Store) Claim(ctx context.Context, q store.ClaimQuery, handOff func([]store.Claimed)) (int, error) {
	if s.w == nil {
		return 0, store.ErrReadOnly
	}
	var cs []store.Claimed
	err := s.w.doAfter(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		if q.Limited {
			cs, err = claimLimitedTx(ctx, tx, q)
		} else {
			cs, err = claimTx(ctx, tx, q)
		}
		return err
	}, func() { handOff(cs) }) // in commit order: no later claim is handed out first
	if err != nil {
		return 0, err
	}
	return len(cs), nil
}

// nextDueSQL is the earliest visibility timestamp of one priority's live
// rows of a queue's kinds (the JSON list ?3): per kind, the first entry of
// its range of lq_jobs_kind_due; NULL when none.
const nextDueSQL = `SELECT min((SELECT visible_at FROM lq_jobs
    WHERE queue = ?1 AND state IN (0, 1) AND priority = ?2 AND kind = k.value
    ORDER BY visible_at LIMIT 1))
FROM json_each(?3) k`

// NextDue implements store.Runtime. It reads in one snapshot, one priority at
// a time (see claimSQL).
func (s *Store) NextDue(ctx context.Context, queue string, kinds []string, kindsJSON string) (int64, bool, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	var earliest int64
	ok := false
	err = priorities(ctx, tx, queue, func(prio int64) (bool, error) {
		var v sql.NullInt64
		if err := tx.QueryRowContext(ctx, nextDueSQL, queue, prio, kindsJSON).Scan(&v); err != nil {
			return false, err
		}
		if v.Valid && (!ok || v.Int64 < earliest) {
			earliest, ok = v.Int64, true
		}
		return true, nil
	})
	if err != nil || !ok {
		return 0, false, err
	}
	return earliest, true, nil
}

const extendSQL = `UPDATE lq_jobs SET visible_at = ? WHERE id = ? AND lease = ? AND state = 1`

// Extend implements store.Runtime.
func (s *Store) Extend(ctx context.Context, leases []store.Lease, until int64) ([]int, error) {
	if s.w == nil {
		return nil, store.ErrReadOnly
	}
	var lost []int
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		lost = lost[:0]
		for i, l := range leases {
			ok, err := execHolds(ctx, tx, extendSQL, until, l.ID, l.Lease)
			if err != nil {
				return err
			}
			if !ok {
				lost = append(lost, i)
			}
		}
		return nil
	})
	return lost, err
}

// execHolds runs a write conditional on a lease and reports whether it
// changed the row (false: the lease was lost).
func execHolds(ctx context.Context, tx Execer, query string, args ...any) (bool, error) {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

const releaseSQL = `UPDATE lq_jobs SET state = 0, visible_at = ?, lease = NULL, attempt = max(attempt - 1, 0)
	WHERE id = ? AND lease = ? AND state = 1 RETURNING queue, state, visible_at`

// Release implements store.Runtime.
func (s *Store) Release(ctx context.Context, leases []store.Lease, now int64) error {
	if s.w == nil {
		return store.ErrReadOnly
	}
	return s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		for _, l := range leases {
			if _, err := execCounted(ctx, tx, releaseSQL, fromRunning, now, l.ID, l.Lease); err != nil {
				return err
			}
		}
		return nil
	})
}

// Complete implements store.Runtime: the success goes into the writer's next
// transaction.
func (s *Store) Complete(c store.Completion) {
	if s.w == nil {
		if c.Notify != nil {
			c.Notify(store.ErrReadOnly)
		}
		return
	}
	s.w.complete(c)
}

// Flush implements store.Runtime.
func (s *Store) Flush(ctx context.Context) error {
	if s.w == nil {
		return nil
	}
	err := s.w.do(ctx, func(context.Context, Execer) error { return nil })
	if errors.Is(err, store.ErrClosed) {
		return nil
	}
	return err
}

const (
	completeDeleteSQL = `DELETE FROM lq_jobs WHERE id = ? AND lease = ? AND state = 1 RETURNING queue, state, visible_at`
	completeKeepSQL   = `UPDATE lq_jobs SET state = 2, lease = NULL, finished_at = ?1, visible_at = ?1
		WHERE id = ?2 AND lease = ?3 AND state = 1 RETURNING queue, state, visible_at`
)

// CompleteTx implements store.Runtime.
func (s *Store) CompleteTx(ctx context.Context, tx store.Tx, l store.Lease, keepAt int64) error {
	flow, err := flowOf(ctx, tx.SQL(), l.ID)
	if err != nil {
		return err
	}
	if flow != 0 {
		ok, err := completeFlow(ctx, tx.SQL(), store.Completion{Lease: l, At: keepAt, Keep: keepAt != 0, Flow: flow})
		if err == nil && !ok {
			err = store.ErrLeaseLost
		}
		return err
	}
	var n int
	if keepAt != 0 {
		n, err = execCounted(ctx, tx.SQL(), completeKeepSQL, fromRunning, keepAt, l.ID, l.Lease)
	} else {
		n, err = execCounted(ctx, tx.SQL(), completeDeleteSQL, gone, l.ID, l.Lease)
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrLeaseLost
	}
	return nil
}

// Holds implements store.Runtime.
func (s *Store) Holds(ctx context.Context, l store.Lease) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM lq_jobs WHERE id = ? AND lease = ? AND state = 1`, l.ID, l.Lease).Scan(&n)
	return n == 1, err
}

// WriteCompletions writes cs in one transaction of the writer, as one batch,
// and returns each one's outcome (nil or store.ErrLeaseLost).
func (s *Store) WriteCompletions(ctx context.Context, cs []store.Completion) ([]error, error) {
	var results []error
	err := s.Do(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		results, err = s.writeCompletions(ctx, tx, cs)
		return err
	})
	return results, err
}

// writeCompletions writes a batch of successes inside the writer's
// transaction. Each is conditional on its lease; one whose lease was lost
// gets ErrLeaseLost and changes nothing.
func (s *Store) writeCompletions(ctx context.Context, tx Execer, cs []store.Completion) ([]error, error) {
	results := make([]error, len(cs))
	var del []int
	for i, c := range cs {
		if c.Flow != 0 {
			// A workflow's job: its own statements (workflow.go).
			ok, err := completeFlow(ctx, tx, c)
			if err != nil {
				return nil, err
			}
			if !ok {
				results[i] = store.ErrLeaseLost
			}
			continue
		}
		if !c.Keep {
			del = append(del, i)
			continue
		}
		n, err := execCounted(ctx, tx, completeKeepSQL, fromRunning, c.At, c.ID, c.Lease.Lease)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			results[i] = store.ErrLeaseLost
		}
	}
	if len(del) > 0 {
		if err := deleteCompleted(ctx, tx, cs, del, results); err != nil {
			return nil, err
		}
	}
	// A job not marked as a workflow's parent when claimed may have been
	// given a child since (Workflow.NeedsJob): one probe of lq_deps for
	// the whole batch finds it.
	var plain []int64
	for i, c := range cs {
		if c.Flow&store.FlowParent == 0 && results[i] == nil {
			plain = append(plain, c.ID)
		}
	}
	if err := resolveFinished(ctx, tx, plain, 1, func(id int64) int64 {
		for _, c := range cs {
			if c.ID == id {
				return c.At
			}
		}
		return 0
	}, ""); err != nil {
		return nil, err
	}
	return results, nil
}

// completeDeleteAllSQL deletes the succeeded jobs of one lease (one claim)
// in one statement; a row whose lease is no longer that lease stays.
const completeDeleteAllSQL = `DELETE FROM lq_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND lease = ?2 AND state = 1`

// completeDeleteManySQL is completeDeleteAllSQL returning the ids it
// deleted. It runs only when some row no longer held the lease: SQLite
// buffers every RETURNING row, which costs about a fifth of the delete.
const completeDeleteManySQL = completeDeleteAllSQL + "\nRETURNING id"

// leaseQueueSQL is the queue of any row of the JSON id list ?1 that holds
// lease ?2; no row when none does.
const leaseQueueSQL = `SELECT queue FROM lq_jobs WHERE lease = ?2 AND state = 1 AND id IN (SELECT value FROM json_each(?1)) LIMIT 1`

// completeDeleteOneSQL is completeDeleteAllSQL for a single job, returning
// its queue and state for the counts.
const completeDeleteOneSQL = `DELETE FROM lq_jobs WHERE id = ?1 AND lease = ?2 AND state = 1 RETURNING queue, state, visible_at`

// deleteCompleted deletes the jobs of the successes cs[i] for i in which, one
// statement per lease (a claim takes one lease for its whole batch), and
// sets results[i] to ErrLeaseLost for every job whose row did not hold its
// lease any more.
func deleteCompleted(ctx context.Context, tx Execer, cs []store.Completion, which []int, results []error) error {
	byLease := map[int64][]int{} // lease -> indexes in cs
	var leases []int64
	for _, i := range which {
		c := cs[i]
		if _, ok := byLease[c.Lease.Lease]; !ok {
			leases = append(leases, c.Lease.Lease)
		}
		byLease[c.Lease.Lease] = append(byLease[c.Lease.Lease], i)
	}
	deleted := make(map[int64]bool, len(which))
	var ids []byte
	for _, lease := range leases {
		idx := byLease[lease]
		if len(idx) == 1 {
			// One job of its claim: a delete by primary key, cheaper than
			// the json_each list (the common case of an idle queue).
			n, err := execCounted(ctx, tx, completeDeleteOneSQL, gone, cs[idx[0]].ID, lease)
			if err != nil {
				return err
			}
			if n == 0 {
				results[idx[0]] = store.ErrLeaseLost
			}
			continue
		}

		ids = appendIDsJSON(ids[:0], len(idx), func(k int) int64 { return cs[idx[k]].ID })
		// A lease is one claim's, of one queue: the queue of any of its
		// rows that still holds it is the queue of every row deleted below.
		var queue string
		// TEXT, not a BLOB: json_each would read a BLOB as JSONB.
		err := tx.QueryRowContext(ctx, leaseQueueSQL, string(ids), lease).Scan(&queue)
		if errors.Is(err, sql.ErrNoRows) {
			for _, i := range idx {
				results[i] = store.ErrLeaseLost
			}
			continue
		}
		if err != nil {
			return err
		}
		if all, err := deleteAllHeld(ctx, tx, string(ids), lease, len(idx)); err != nil || all {
			if err != nil {
				return err
			}
			if err := moveCount(ctx, tx, countOf(queue, store.Running, 0), removed, len(idx)); err != nil {
				return err
			}
			continue
		}
		rows, err := tx.QueryContext(ctx, completeDeleteManySQL, string(ids), lease)
		if err != nil {
			return err
		}
		clear(deleted)
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			deleted[id] = true
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, i := range idx {
			if !deleted[cs[i].ID] {
				results[i] = store.ErrLeaseLost
			}
		}
		if err := moveCount(ctx, tx, countOf(queue, store.Running, 0), removed, len(deleted)); err != nil {
			return err
		}
	}
	return nil
}

// deleteAllHeld deletes the n rows of the JSON id list ids if every one of
// them still holds lease, and reports whether it did; otherwise it deletes
// nothing (the statement is undone to its savepoint), and the caller learns
// which rows held the lease with completeDeleteManySQL's RETURNING.
func deleteAllHeld(ctx context.Context, tx Execer, ids string, lease int64, n int) (bool, error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT lq_done"); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, completeDeleteAllSQL, ids, lease)
	if err != nil {
		return false, err // the caller's transaction rolls back
	}
	deleted, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if deleted != int64(n) {
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO lq_done"); err != nil {
			return false, err
		}
	}
	if _, err := tx.ExecContext(ctx, "RELEASE lq_done"); err != nil {
		return false, err
	}
	return deleted == int64(n), nil
}

// idsJSON renders ids as a JSON array for json_each, as TEXT: json_each
// would read a BLOB as JSONB.
func idsJSON(ids []int64) string {
	return string(appendIDsJSON(nil, len(ids), func(i int) int64 { return ids[i] }))
}

// appendIDsJSON appends the JSON array of the n ids id(0)…id(n-1) to b.
func appendIDsJSON(b []byte, n int, id func(i int) int64) []byte {
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id(i), 10)
	}
	return append(b, ']')
}

const (
	retrySQL = `UPDATE lq_jobs SET state = 0, visible_at = ?, lease = NULL, last_error = ?
		WHERE id = ? AND lease = ? AND state = 1 RETURNING queue, state, visible_at`
	buryFailedSQL = `UPDATE lq_jobs SET state = 3, lease = NULL, finished_at = ?, last_error = ?, dead_reason = ?
		WHERE id = ? AND lease = ? AND state = 1 RETURNING queue, state, visible_at`
	buryLostSQL = `UPDATE lq_jobs SET state = 3, lease = NULL, finished_at = ?, dead_reason = ?, attempt = ?
		WHERE id = ? AND lease = ? AND state = 1 RETURNING queue, state, visible_at`
	attemptSQL = `INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay, process, host, pid)
		VALUES (?, ?, ?, ?, ?, ?, ?, NULLIF(?, 0), NULLIF(?, ''), NULLIF(?, 0))`
)

func insertAttempt(ctx context.Context, tx Execer, id int64, a store.Attempt) error {
	_, err := tx.ExecContext(ctx, attemptSQL, id, a.Attempt, a.StartedAt, a.FinishedAt, a.Error, a.Decision, a.Delay,
		a.Process, a.Host, a.PID)
	return err
}

// Retry implements store.Runtime.
func (s *Store) Retry(ctx context.Context, r store.Retry) error {
	if s.w == nil {
		return store.ErrReadOnly
	}
	return sqlitefile.ClassifyWriteError(s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		n, err := execCounted(ctx, tx, retrySQL, fromRunning, r.Due, r.LastError, r.ID, r.Lease.Lease)
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrLeaseLost
		}
		return insertAttempt(ctx, tx, r.ID, r.Record)
	}))
}

// Bury implements store.Runtime.
func (s *Store) Bury(ctx context.Context, b store.Burial) error {
	if s.w == nil {
		return store.ErrReadOnly
	}
	return sqlitefile.ClassifyWriteError(s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var n int
		var err error
		if b.FollowUpID != nil {
			*b.FollowUpID = 0
		}
		if b.LastError != nil {
			n, err = execCounted(ctx, tx, buryFailedSQL, fromRunning, b.At, *b.LastError, b.Reason, b.ID, b.Lease.Lease)
		} else {
			n, err = execCounted(ctx, tx, buryLostSQL, fromRunning, b.At, b.Reason, b.Attempt, b.ID, b.Lease.Lease)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrLeaseLost
		}
		rec := b.Record
		rec.Error = buryRecordError(b) // the dead letter's error, once (deadtext.go)
		if err := insertAttempt(ctx, tx, b.ID, rec); err != nil {
			return err
		}
		if b.Flow&store.FlowParent != 0 {
			if err := resolveFlow(ctx, tx, b.ID, 2, nil, b.At, fmt.Sprintf("workflow: parent job %d died", b.ID)); err != nil {
				return err
			}
		} else if err := resolveFinished(ctx, tx, []int64{b.ID}, 2, func(int64) int64 { return b.At }, "workflow: parent job %d died"); err != nil {
			// A stored job given a child while this delivery ran.
			return err
		}
		if b.FollowUp != nil {
			id, err := insertOne(ctx, tx, b.FollowUp, nil)
			switch {
			case errors.Is(err, store.ErrDuplicate):
			case err != nil:
				return fmt.Errorf("follow-up job: %w", err)
			case b.FollowUpID != nil:
				*b.FollowUpID = id
			}
		}
		return nil
	}))
}

// oldestCompletedSQL finds the earliest finish of a retained completed job
// with one seek of lq_jobs_finished.
const oldestCompletedSQL = `SELECT min(finished_at) FROM lq_jobs WHERE state = 2`

// OldestCompleted implements store.Admin.
func (s *Store) OldestCompleted(ctx context.Context) (int64, bool, error) {
	var v sql.NullInt64
	if err := s.db.QueryRowContext(ctx, oldestCompletedSQL).Scan(&v); err != nil || !v.Valid {
		return 0, false, err
	}
	return v.Int64, true, nil
}

// PurgeCompleted implements store.Admin.
func (s *Store) PurgeCompleted(ctx context.Context, before int64) (int, error) {
	if s.w == nil {
		return 0, store.ErrReadOnly
	}
	var n int
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		n, err = execCounted(ctx, tx, `DELETE FROM lq_jobs WHERE state = 2 AND finished_at < ? RETURNING queue, state, visible_at`, gone, before)
		return err
	})
	return n, err
}
