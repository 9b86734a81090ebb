package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// Workflows (store/workflow.go): jobs waiting for their parents in state 5,
// edges in lq_deps, resolved by lq_resolve and lq_flow_done (migration 0006)
// in the transaction that records a parent's final outcome.

const (
	// flowIDsSQL takes $2 ids of the job id sequence of table $1, in
	// order, for a workflow's jobs: inserted with them in one statement
	// per chunk, each job knows its id before its edges are written.
	flowIDsSQL       = `SELECT nextval(pg_get_serial_sequence($1, 'id')) FROM generate_series(1, $2)`
	insertFlowJobSQL = `INSERT INTO lq_jobs (id, queue, kind, priority, visible_at, run_at, created_at, payload, meta, state, waits)
SELECT u.id, u.queue, u.kind, u.prio, u.vis, u.vis, u.created, u.payload, NULLIF(u.meta, '')::jsonb, u.state, u.waits
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bytea[], $8::text[],
    $9::smallint[], $10::integer[]) AS u(id, queue, kind, prio, vis, created, payload, meta, state, waits)`
	insertEdgesSQL = `INSERT INTO lq_deps (child, parent, mode)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::smallint[])`
	// flowDoneSQL writes the success of one workflow's job in the writer's
	// batch (lq_flow_done): it answers whether the lease held.
	flowDoneSQL = `SELECT lq_flow_done($1, $2, $3, $4, $5, $6)`
	// flowBuriedSQL resolves the children of a job its batch's burial
	// just made dead ($2 its finish time): nothing when the lease was lost.
	// It runs for every burial, marked parent or not: a job given a child
	// while it ran (Workflow.NeedsJob) has edges its delivery did not know
	// of; one probe of lq_deps_parent tells.
	flowBuriedSQL = `SELECT lq_resolve(id, 2::smallint, $2, 'workflow: parent job ' || id || ' died', $3)
FROM lq_jobs WHERE id = $1 AND state = 3 AND finished_at = $2 AND EXISTS (SELECT 1 FROM lq_deps WHERE parent = $1 AND done = 0)`
	// requeueBlockedSQL finds a cancelled job of $1 that needs the success
	// of a parent that died or was cancelled (its requeue is refused).
	requeueBlockedSQL = `SELECT child, parent FROM lq_deps WHERE child = ANY ($1) AND done = 2 AND mode = 0 ORDER BY child, parent LIMIT 1`
	// requeueWaitSQL makes the requeued jobs of $1 that have unfinished
	// parents wait for them again.
	requeueWaitSQL = `UPDATE lq_jobs j SET state = 5, waits = u.n
FROM (SELECT child, count(*) AS n FROM lq_deps WHERE child = ANY ($1) AND done = 0 GROUP BY child) u
WHERE j.id = u.child AND j.state = 0`
	// flowDeletedSQL resolves, as a cancel would, the children of live job
	// $1 just deleted at $2.
	flowDeletedSQL = `SELECT lq_resolve($1::bigint, 2::smallint, $2::bigint, 'workflow: parent job ' || $1::bigint || ' was deleted', $3::text)
WHERE EXISTS (SELECT 1 FROM lq_deps WHERE parent = $1::bigint AND done = 0)`
	// flowSucceededSQL resolves the children of the jobs of $1 that the
	// same batch just wrote as succeeded (at $2), found by one probe of
	// lq_deps_parent each: jobs whose deliveries were not marked as parents
	// but were given a child while they ran. A job whose lease was lost
	// (still pending or running) is not one of them.
	flowSucceededSQL = `SELECT lq_resolve(u.id, 1::smallint, u.at, '', $3)
FROM unnest($1::bigint[], $2::bigint[]) AS u(id, at)
WHERE EXISTS (SELECT 1 FROM lq_deps WHERE parent = u.id AND done = 0)
  AND NOT EXISTS (SELECT 1 FROM lq_jobs j WHERE j.id = u.id AND j.state <> 2)
ORDER BY u.id`
	// lockParentsSQL locks the stored parents of $1, live or not, in id
	// order: an outcome of theirs being written waits for this transaction,
	// or this one for it.
	lockParentsSQL = `SELECT id, state FROM lq_jobs WHERE id = ANY ($1) ORDER BY id FOR UPDATE`
	// markParentsSQL marks the jobs of $1 as workflows' parents.
	markParentsSQL = `UPDATE lq_jobs SET meta = coalesce(meta, '{}'::jsonb) || jsonb_build_object('flow', coalesce((meta ->> 'flow')::integer, 0) | 1)
WHERE id = ANY ($1)`
	// flowReviveSQL brings back the dependants of the requeued jobs of $1
	// that their deaths cancelled.
	flowReviveSQL = `SELECT lq_revive(id) FROM unnest($1::bigint[]) AS u(id)`
	// flowCancelledSQL resolves the children of the jobs of $1 just
	// cancelled at $2.
	flowCancelledSQL = `SELECT lq_resolve(p, 2::smallint, $2, 'workflow: parent job ' || p || ' was cancelled', $3)
FROM (SELECT DISTINCT parent AS p FROM lq_deps WHERE parent = ANY ($1) ORDER BY 1) x`
)

// InsertFlow implements store.Flows.
func (s *pgStore) InsertFlow(ctx context.Context, apptx store.Tx, jobs []store.NewJob, edges []store.Edge) ([]int64, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	if tx := apptx.SQL(); tx != nil {
		if err := s.checkTx(ctx, tx); err != nil {
			return nil, err
		}
		return s.insertFlow(ctx, tx, jobs, edges)
	}
	var ids []int64
	o := &op{ctx: ctx, run: func(ctx context.Context) error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			ids, err = s.insertFlow(ctx, tx, jobs, edges)
			return err
		})
	}}
	if err := s.ins.submit(o); err != nil {
		return nil, err
	}
	return ids, nil
}

func (s *pgStore) insertFlow(ctx context.Context, tx *sql.Tx, jobs []store.NewJob, edges []store.Edge) ([]int64, error) {
	if err := s.lockStoredParents(ctx, tx, edges); err != nil {
		return nil, err
	}
	ids, err := sqlkit.QueryAll(ctx, tx, flowIDsSQL, []any{quoteIdent(s.schema) + ".lq_jobs", len(jobs)}, sqlkit.ScanID)
	if err != nil {
		return nil, missingTables(err)
	}
	if len(ids) != len(jobs) {
		return nil, fmt.Errorf("litequeue: the id sequence gave %d ids for %d workflow jobs", len(ids), len(jobs))
	}
	slices.Sort(ids)
	queues := map[string]bool{}
	for lo := 0; lo < len(jobs); lo += 5000 {
		hi := min(len(jobs), lo+5000)
		n := hi - lo
		qs, kinds, metas := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		prios, vis, created := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
		payloads, states, waits := make([][]byte, 0, n), make([]int16, 0, n), make([]int32, 0, n)
		for i := lo; i < hi; i++ {
			nj := &jobs[i]
			st := store.Pending
			if nj.Waits > 0 {
				st = store.Waiting
			} else {
				queues[nj.Queue] = true
			}
			payload := nj.Payload
			if payload == nil {
				payload = []byte{}
			}
			qs, kinds, metas = append(qs, nj.Queue), append(kinds, nj.Kind), append(metas, nj.Meta)
			prios, vis, created = append(prios, int64(nj.Priority)), append(vis, nj.VisibleAt), append(created, nj.CreatedAt)
			payloads, states, waits = append(payloads, payload), append(states, int16(st)), append(waits, int32(nj.Waits))
		}
		if _, err := tx.ExecContext(ctx, s.q(insertFlowJobSQL), ids[lo:hi], qs, kinds, prios, vis, created, payloads, metas, states, waits); err != nil {
			return nil, fmt.Errorf("workflow jobs %d-%d: %w", lo, hi-1, err)
		}
	}
	if len(edges) > 0 {
		child, parent, mode := make([]int64, len(edges)), make([]int64, len(edges)), make([]int16, len(edges))
		for i, e := range edges {
			child[i], parent[i], mode[i] = ids[e.Child], e.Stored, int16(e.Mode)
			if e.Stored == 0 {
				parent[i] = ids[e.Parent]
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(insertEdgesSQL), child, parent, mode); err != nil {
			return nil, fmt.Errorf("workflow edges: %w", err)
		}
	}
	return ids, s.notifyTx(ctx, tx, queues)
}

// lockStoredParents locks the stored parents of edges (Edge.Stored), checks
// that each is live and marks it as a parent, before anything else is
// written: the row lock serialises the edge with the parent's outcome,
// whose transaction then finds the edge (flowSucceededSQL, flowBuriedSQL,
// flowCancelledSQL), or this one finds the parent finished.
func (s *pgStore) lockStoredParents(ctx context.Context, tx *sql.Tx, edges []store.Edge) error {
	var ids []int64
	for _, e := range edges {
		if e.Stored != 0 {
			ids = append(ids, e.Stored)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	type row struct {
		id int64
		st store.State
	}
	rows, err := sqlkit.QueryAll(ctx, tx, s.q(lockParentsSQL), []any{ids}, func(r *sql.Rows, x *row) error {
		return r.Scan(&x.id, &x.st)
	})
	if err != nil {
		return missingTables(err)
	}
	states := make(map[int64]store.State, len(rows))
	for _, r := range rows {
		states[r.id] = r.st
	}
	for _, e := range edges {
		if e.Stored == 0 {
			continue
		}
		st, ok := states[e.Stored]
		if !ok {
			st = -1
		}
		if !store.LiveParent(st) {
			return &store.ParentNotLiveError{Child: e.Child, ID: e.Stored, State: st}
		}
	}
	_, err = tx.ExecContext(ctx, s.q(markParentsSQL), ids)
	return err
}

// completeTxFlow is CompleteTx for a job with edges (flowOfSQL), on the
// application's tx.
func (s *pgStore) completeTxFlow(ctx context.Context, tx *sql.Tx, l store.Lease, keepAt int64, flow int) error {
	var ok bool
	if err := tx.QueryRowContext(ctx, s.q(flowDoneSQL), l.ID, l.Lease, keepAt, keepAt, flow, s.channel).Scan(&ok); err != nil {
		return missingTables(err)
	}
	if !ok {
		return fmt.Errorf("litequeue: complete job %d: %w", l.ID, store.ErrLeaseLost)
	}
	return nil
}

// flowOfSQL answers whether job $1 has children and whether it has
// parents: two probes of lq_deps's indexes.
const flowOfSQL = `SELECT EXISTS (SELECT 1 FROM lq_deps WHERE parent = $1), EXISTS (SELECT 1 FROM lq_deps WHERE child = $1)`

func (s *pgStore) flowOf(ctx context.Context, tx *sql.Tx, id int64) (int, error) {
	var parent, child bool
	if err := tx.QueryRowContext(ctx, s.q(flowOfSQL), id).Scan(&parent, &child); err != nil {
		return 0, missingTables(err)
	}
	f := 0
	if parent {
		f |= store.FlowParent
	}
	if child {
		f |= store.FlowChild
	}
	return f, nil
}

// ParentResults implements store.Flows.
func (s *pgStore) ParentResults(ctx context.Context, child int64) ([]store.ParentResult, error) {
	return readAll(s, ctx, s.q(`SELECT parent, mode, done, output FROM lq_deps WHERE child = $1 ORDER BY parent`), []any{child},
		func(rows *sql.Rows, r *store.ParentResult) error {
			return rows.Scan(&r.Parent, &r.Mode, &r.Done, &r.Output)
		})
}

// FlowGraph implements store.Flows: a walk of the edges from id in both
// directions, in one read-only transaction.
func (s *pgStore) FlowGraph(ctx context.Context, id int64, limit int) ([]store.FlowNode, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	seen := map[int64]bool{id: true}
	queue := []int64{id}
	var nodes []store.FlowNode
	for len(queue) > 0 && len(nodes) < limit {
		cur := queue[0]
		queue = queue[1:]
		var n store.FlowNode
		var reason sql.NullString
		err := tx.QueryRowContext(ctx, s.q(`SELECT id, queue, kind, state, visible_at, waits, dead_reason FROM lq_jobs WHERE id = $1`), cur).
			Scan(&n.ID, &n.Queue, &n.Kind, &n.State, &n.VisibleAt, &n.Waits, &reason)
		if errors.Is(err, sql.ErrNoRows) {
			if cur == id {
				return nil, fmt.Errorf("litequeue: workflow of job %d: %w", id, store.ErrNotFound)
			}
			n = store.FlowNode{ID: cur, State: -1}
		} else if err != nil {
			return nil, missingTables(err)
		}
		n.Reason = reason.String
		rows, err := tx.QueryContext(ctx, s.q(`SELECT parent, mode, done FROM lq_deps WHERE child = $1
UNION ALL SELECT -child, mode, done FROM lq_deps WHERE parent = $1`), cur)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var r store.ParentResult
			if err := rows.Scan(&r.Parent, &r.Mode, &r.Done); err != nil {
				rows.Close()
				return nil, err
			}
			other := r.Parent
			if other < 0 {
				other = -other
			} else {
				n.Parents = append(n.Parents, r)
			}
			if !seen[other] {
				seen[other] = true
				queue = append(queue, other)
			}
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, err
		}
		rows.Close()
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b store.FlowNode) int { return cmp.Compare(a.ID, b.ID) })
	return nodes, nil
}
