package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

// Progress, output and unique jobs (Runtime.Report, Admin.Progress, NewJob.Unique).

// slowPath reports whether jobs holds a unique job or a job with metadata: such a batch is inserted
// one job at a time (insertEach), on its transaction, instead of by the
// merged insert.
func slowPath(jobs []store.NewJob) bool {
	for i := range jobs {
		if jobs[i].Unique != nil || jobs[i].Meta != "" || jobs[i].Group != "" {
			return true
		}
	}
	return false
}

// Report implements store.Runtime.
func (s *pgStore) Report(ctx context.Context, r store.Report) error {
	if err := s.writable(); err != nil {
		return err
	}
	if !r.HasProgress && r.Output == nil {
		return nil
	}
	var n int64
	err := s.db.QueryRowContext(ctx, s.q(`WITH u AS (UPDATE lq_jobs SET
    progress = CASE WHEN $1 THEN $2 ELSE progress END,
    progress_msg = CASE WHEN $1 THEN $3 ELSE progress_msg END,
    progress_at = CASE WHEN $1 THEN $4 ELSE progress_at END,
    output = CASE WHEN $5 THEN $6 ELSE output END
WHERE id = $7 AND lease = $8 AND state = 1 RETURNING id)
SELECT count(*) FROM u`), r.HasProgress, r.Fraction, r.Message, r.At, r.Output != nil, r.Output, r.ID, r.Lease.Lease).Scan(&n)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("litequeue: report of job %d: %w", r.ID, store.ErrLeaseLost)
	}
	return nil
}

// Progress implements store.Admin.
func (s *pgStore) Progress(ctx context.Context, id int64) (store.JobProgress, error) {
	var p store.JobProgress
	var state int16
	var frac sql.NullFloat64
	var msg sql.NullString
	var at sql.NullInt64
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT state, visible_at, progress, progress_msg, progress_at, output FROM lq_jobs WHERE id = $1`), id).
			Scan(&state, &p.VisibleAt, &frac, &msg, &at, &p.Output)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return store.JobProgress{}, fmt.Errorf("litequeue: job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.JobProgress{}, err
	}
	p.State = store.State(state)
	p.HasProgress = at.Valid
	p.Fraction, p.Message, p.At = frac.Float64, msg.String, at.Int64
	return p, nil
}

const (
	// insertOneSQL inserts one job, with its group if any, unless a unique index refuses it (a live
	// holder of its idempotency key, or a row blocking its uniqueness key):
	// then it inserts nothing and answers no row.
	insertOneSQL = `INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, idem_key, unique_key, unique_states, meta, grp)
VALUES ($1, $2, $3, $4, $4, $5, $6, NULLIF($7, ''), $8, $9, NULLIF($10, '')::jsonb, NULLIF($11, ''))
ON CONFLICT DO NOTHING
RETURNING id`
	uniqueHolderSQL = `SELECT id, state, kind FROM lq_jobs
WHERE unique_key = $1 AND ((unique_states >> state) & 1) = 1`
)

// insertEach inserts jobs one at a time on tx, honouring idempotency keys
// and uniqueness (with Replace), and notifies their queues.
func (s *pgStore) insertEach(ctx context.Context, tx *sql.Tx, jobs []store.NewJob) ([]int64, []error, error) {
	ids := make([]int64, len(jobs))
	dups := make([]error, len(jobs))
	queues := map[string]bool{}
	for i := range jobs {
		id, err := s.insertOne(ctx, tx, &jobs[i])
		var de *store.DuplicateError
		var ue *store.UniqueError
		switch {
		case errors.As(err, &de) || errors.As(err, &ue):
			ids[i], dups[i] = id, err
		case err != nil:
			return nil, nil, err
		default:
			ids[i] = id
			queues[jobs[i].Queue] = true
		}
	}
	if err := s.notifyTx(ctx, tx, queues); err != nil {
		return nil, nil, err
	}
	return ids, dups, nil
}

// insertOne inserts nj on tx: a live holder of its key is a
// *DuplicateError; a row blocking its uniqueness a *UniqueError, unless
// nj.Unique.Replace and that row is pending, which is then deleted with its
// history (nj.Unique.Replaced names it).
func (s *pgStore) insertOne(ctx context.Context, tx *sql.Tx, nj *store.NewJob) (int64, error) {
	var ukey any
	var ustates any
	if nj.Unique != nil {
		nj.Unique.Replaced = 0
		ukey, ustates = nj.Unique.Key, int16(nj.Unique.States)
	}
	payload := nj.Payload
	if payload == nil {
		payload = []byte{}
	}
	insert := func() (int64, bool, error) {
		var id int64
		err := tx.QueryRowContext(ctx, s.q(insertOneSQL), nj.Queue, nj.Kind, int64(nj.Priority), nj.VisibleAt, nj.CreatedAt,
			payload, nj.Key, ukey, ustates, nj.Meta, nj.Group).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return id, err == nil, err
	}
	id, ok, err := insert()
	if ok || err != nil {
		return id, err
	}
	if nj.Key != "" {
		var holder int64
		err := tx.QueryRowContext(ctx, s.q(holderSQL), nj.Key).Scan(&holder)
		if err == nil {
			return holder, &store.DuplicateError{Key: nj.Key, ID: holder}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
	}
	if nj.Unique == nil {
		return 0, fmt.Errorf("litequeue: insert of a %s job met a conflict no holder explains", nj.Kind)
	}
	var holder int64
	var state int16
	var kind string
	if err := tx.QueryRowContext(ctx, s.q(uniqueHolderSQL), nj.Unique.Key).Scan(&holder, &state, &kind); err != nil {
		return 0, fmt.Errorf("litequeue: unique job: the insert met a twin that the lookup does not find: %w", err)
	}
	if !nj.Unique.Replace || store.State(state) != store.Pending {
		return holder, &store.UniqueError{ID: holder, State: store.State(state), Kind: kind}
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.q(fmt.Sprintf(deleteWithHistorySQL,
		"DELETE FROM lq_jobs WHERE id = $1 AND state = 0 RETURNING id")), holder).Scan(&n); err != nil {
		return 0, err
	}
	// A workflow's parent (Workflow.NeedsJob) deleted while live: its
	// dependants are resolved as a cancel would.
	if _, err := tx.ExecContext(ctx, s.q(flowDeletedSQL), holder, nj.CreatedAt, s.channel); err != nil {
		return 0, err
	}
	nj.Unique.Replaced = holder
	id, ok, err = insert()
	if err == nil && !ok {
		err = fmt.Errorf("litequeue: unique job: still blocked after replacing job %d", holder)
	}
	return id, err
}

// uniqueTwin returns the *UniqueError of the row that keeps dead row id
// from becoming pending.
func (s *pgStore) uniqueTwin(ctx context.Context, tx *sql.Tx, id int64) error {
	var holder int64
	var state int16
	var kind string
	err := tx.QueryRowContext(ctx, s.q(`SELECT t.id, t.state, t.kind FROM lq_jobs t
WHERE t.unique_key = (SELECT unique_key FROM lq_jobs WHERE id = $1 AND (unique_states & 1) = 1) AND t.unique_key IS NOT NULL
  AND ((t.unique_states >> t.state) & 1) = 1 AND t.id <> $1`), id).Scan(&holder, &state, &kind)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return &store.UniqueError{ID: holder, State: store.State(state), Kind: kind}
}
