package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// Workflows (store/workflow.go): jobs waiting for their parents in state 5,
// edges in lq_deps (migration 0013), resolved by the transaction that
// records a parent's final outcome.

const (
	insertFlowJobSQL = `INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, meta, state, waits)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertEdgeSQL = `INSERT INTO lq_deps (child, parent, mode) VALUES (?, ?, ?)`
)

// InsertFlow implements store.Flows.
func (s *Store) InsertFlow(ctx context.Context, tx store.Tx, jobs []store.NewJob, edges []store.Edge) ([]int64, error) {
	if !tx.IsZero() {
		return insertFlow(ctx, tx.SQL(), jobs, edges)
	}
	if s.w == nil {
		return nil, store.ErrReadOnly
	}
	var ids []int64
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		ids, err = insertFlow(ctx, tx, jobs, edges)
		return err
	})
	if err != nil {
		return nil, sqlitefile.ClassifyWriteError(err)
	}
	return ids, nil
}

// insertFlow writes jobs and edges on tx: a job with parents waiting, the
// others pending.
func insertFlow(ctx context.Context, tx Execer, jobs []store.NewJob, edges []store.Edge) ([]int64, error) {
	if err := markStoredParents(ctx, tx, edges); err != nil {
		return nil, err
	}
	ids := make([]int64, len(jobs))
	for i := range jobs {
		nj := &jobs[i]
		st := store.Pending
		if nj.Waits > 0 {
			st = store.Waiting
		}
		res, err := tx.ExecContext(ctx, insertFlowJobSQL, nj.Queue, nj.Kind, nj.Priority, nj.VisibleAt, nj.VisibleAt,
			nj.CreatedAt, nj.Payload, metaArg(nj), int(st), nj.Waits)
		if err != nil {
			return nil, fmt.Errorf("workflow job %d: %w", i, err)
		}
		if ids[i], err = res.LastInsertId(); err != nil {
			return nil, err
		}
		if len(nj.Tags) > 0 {
			if err := writeTags(ctx, tx, ids[i], nj); err != nil {
				return nil, err
			}
		}
		if err := addCount(ctx, tx, countOf(nj.Queue, st, nj.VisibleAt), 1); err != nil {
			return nil, err
		}
	}
	for _, e := range edges {
		parent := e.Stored
		if parent == 0 {
			parent = ids[e.Parent]
		}
		if _, err := tx.ExecContext(ctx, insertEdgeSQL, ids[e.Child], parent, int(e.Mode)); err != nil {
			return nil, fmt.Errorf("workflow edge %d -> %d: %w", e.Parent, e.Child, err)
		}
	}
	return ids, nil
}

// markParentSQL marks stored job ?1 as a workflow's parent (MetaDoc.Flow
// |= FlowParent).
const markParentSQL = `UPDATE lq_jobs SET meta = json_set(coalesce(meta, '{}'), '$.flow', coalesce(meta ->> '$.flow', 0) | 1)
WHERE id = ?1`

// markStoredParents checks, on tx and before anything is written, that the
// stored parents of edges are live, and marks them: the writer serialises
// this with any outcome of theirs, whose transaction then finds the edge
// (resolveFinished).
func markStoredParents(ctx context.Context, tx Execer, edges []store.Edge) error {
	var marks []int64
	for _, e := range edges {
		if e.Stored == 0 {
			continue
		}
		st := -1
		err := tx.QueryRowContext(ctx, `SELECT state FROM lq_jobs WHERE id = ?`, e.Stored).Scan(&st)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err != nil || !store.LiveParent(store.State(st)) {
			return &store.ParentNotLiveError{Child: e.Child, ID: e.Stored, State: store.State(st)}
		}
		marks = append(marks, e.Stored)
	}
	for _, id := range marks {
		if _, err := tx.ExecContext(ctx, markParentSQL, id); err != nil {
			return err
		}
	}
	return nil
}

const (
	// flowDoneSQL marks the edges of a finished parent (?1) with its
	// outcome (?2: 1 succeeded, 2 died or cancelled) and, on success, its
	// output (?3), once: an edge marked done counts no more, so resolving
	// a parent twice changes nothing.
	flowDoneSQL = `UPDATE lq_deps SET done = ?2, output = ?3 WHERE parent = ?1 AND done = 0`

	// flowMetSQL counts parent ?2 as met by its waiting children (all of
	// them, or, ?3 = 1, only those that run after any outcome): one whose
	// last unmet parent it was becomes pending, due at the later of its own
	// due time and ?1. It reads the parent's edges only (lq_deps_parent).
	flowMetSQL = `UPDATE lq_jobs SET waits = waits - 1,
		state = CASE WHEN waits = 1 THEN 0 ELSE 5 END,
		visible_at = CASE WHEN waits = 1 THEN max(visible_at, ?1) ELSE visible_at END
	WHERE id IN (SELECT child FROM lq_deps WHERE parent = ?2 AND done = 0 AND mode >= ?3) AND state = 5
	RETURNING queue, state, visible_at`

	// flowCancelSQL cancels, with reason ?3, the waiting children of parent
	// ?2 that need its success.
	flowCancelSQL = `UPDATE lq_jobs SET state = 4, lease = NULL, finished_at = ?1, dead_reason = ?3
	WHERE id IN (SELECT child FROM lq_deps WHERE parent = ?2 AND done = 0 AND mode = 0) AND state = 5
	RETURNING id, queue`

	// flowChildDoneSQL deletes the edges of a child that succeeded: it
	// needs its parents' outputs no more.
	flowChildDoneSQL = `DELETE FROM lq_deps WHERE child = ?`
)

// fromWaiting is the move of a statement that changed waiting rows into
// what it returned.
func fromWaiting(queue string, st store.State, visible int64) (countKey, countKey) {
	return countOf(queue, store.Waiting, 0), countOf(queue, st, visible)
}

// step is one finished job whose children resolveFlow resolves.
type step struct {
	id   int64
	done int8
	why  string
}

// resolveFlow records the final outcome of job parent for its children, on
// tx: done 1 (succeeded) counts it as met for every child, done 2 (died
// or cancelled) for the children that run after any outcome and cancels
// the others with reason why, then resolves their children the same way.
// Each step reads the edges of one finished job only.
func resolveFlow(ctx context.Context, tx Execer, parent int64, done int8, output []byte, now int64, why string) error {
	work := []step{{parent, done, why}}
	for i := 0; i < len(work); i++ {
		w := work[i]
		minMode := int(store.NeedsSuccess)
		if w.done != 1 {
			minMode = int(store.AfterFinished)
		}
		if _, err := execCounted(ctx, tx, flowMetSQL, fromWaiting, now, w.id, minMode); err != nil {
			return err
		}
		if w.done != 1 {
			var err error
			if work, err = cancelChildren(ctx, tx, w.id, now, w.why, work); err != nil {
				return err
			}
		}
		var out any
		if w.done == 1 && w.id == parent && output != nil {
			out = output
		}
		if _, err := tx.ExecContext(ctx, flowDoneSQL, w.id, int(w.done), out); err != nil {
			return err
		}
	}
	return nil
}

// cancelChildren cancels the waiting children of parent that need its
// success, with reason why, and appends them to work.
func cancelChildren(ctx context.Context, tx Execer, parent, now int64, why string, work []step) ([]step, error) {
	rows, err := tx.QueryContext(ctx, flowCancelSQL, now, parent, why)
	if err != nil {
		return nil, err
	}
	var queues []string
	for rows.Next() {
		var id int64
		var queue string
		if err := rows.Scan(&id, &queue); err != nil {
			rows.Close()
			return nil, err
		}
		queues = append(queues, queue)
		work = append(work, step{id, 2, fmt.Sprintf("workflow: parent job %d was cancelled", id)})
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for _, q := range queues {
		if err := moveCount(ctx, tx, countOf(q, store.Waiting, 0), countOf(q, store.Cancelled, 0), 1); err != nil {
			return nil, err
		}
	}
	return work, nil
}

const (
	completeFlowDeleteSQL = `DELETE FROM lq_jobs WHERE id = ?1 AND lease = ?2 AND state = 1 RETURNING queue, output`
	completeFlowKeepSQL   = `UPDATE lq_jobs SET state = 2, lease = NULL, finished_at = ?3, visible_at = ?3
		WHERE id = ?1 AND lease = ?2 AND state = 1 RETURNING queue, output`
)

// completeFlow writes the success of a workflow's job (c.Flow non-zero) on
// tx and, in the same transaction, resolves its children with its output.
// It reports false when the lease was lost (nothing changed).
func completeFlow(ctx context.Context, tx Execer, c store.Completion) (bool, error) {
	var queue string
	var output []byte
	var err error
	if c.Keep {
		err = tx.QueryRowContext(ctx, completeFlowKeepSQL, c.ID, c.Lease.Lease, c.At).Scan(&queue, &output)
	} else {
		err = tx.QueryRowContext(ctx, completeFlowDeleteSQL, c.ID, c.Lease.Lease).Scan(&queue, &output)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	to := removed
	if c.Keep {
		to = countOf(queue, store.Completed, 0)
	}
	if err := moveCount(ctx, tx, countOf(queue, store.Running, 0), to, 1); err != nil {
		return false, err
	}
	if c.Flow&store.FlowChild != 0 {
		if _, err := tx.ExecContext(ctx, flowChildDoneSQL, c.ID); err != nil {
			return false, err
		}
	}
	if c.Flow&store.FlowParent != 0 {
		if err := resolveFlow(ctx, tx, c.ID, 1, output, c.At, ""); err != nil {
			return false, err
		}
	}
	return true, nil
}

// flowOf reads, for CompleteTx (whose caller does not know), whether job id
// has edges: the bits of MetaDoc.Flow. Two seeks of lq_deps.
func flowOf(ctx context.Context, tx Execer, id int64) (int, error) {
	var parent, child bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM lq_deps WHERE parent = ?1),
		EXISTS (SELECT 1 FROM lq_deps WHERE child = ?1)`, id).Scan(&parent, &child)
	f := 0
	if parent {
		f |= store.FlowParent
	}
	if child {
		f |= store.FlowChild
	}
	return f, err
}

// deletedParent is the reason of a dependant cancelled by the deletion of
// its live parent (a unique job replaced).
const deletedParent = "workflow: parent job %d was deleted"

// Deleting finished jobs deletes their edges as children (a parent's
// edges were resolved at its outcome and go with its children): one probe
// of lq_deps's primary key per job, run before the jobs' delete, with the
// same selection.
const (
	bulkDeleteEdgesSQL     = `DELETE FROM lq_deps WHERE child IN (SELECT id FROM lq_jobs WHERE state IN (2, 3, 4) AND id IN (SELECT value FROM json_each(?)))`
	purgeCancelledEdgesSQL = `DELETE FROM lq_deps WHERE child IN (SELECT id FROM lq_jobs WHERE state = 4 AND finished_at < ?)`
)

// resolveCancelled resolves, on tx, the children of the jobs of ids just
// cancelled.
func resolveCancelled(ctx context.Context, tx Execer, ids []int64, now int64) error {
	return resolveFinished(ctx, tx, ids, 2, func(int64) int64 { return now }, "workflow: parent job %d was cancelled")
}

// unresolvedParentsSQL is which jobs of the JSON id list ?1 have edges
// not resolved yet: one probe of lq_deps_parent per id.
const unresolvedParentsSQL = `SELECT DISTINCT parent FROM lq_deps WHERE parent IN (SELECT value FROM json_each(?1)) AND done = 0`

// resolveFinished resolves, on tx, the children of the jobs of ids that
// have just finished with outcome done (1 succeeded, 2 died or was
// cancelled, with reason why, a format of the parent's id), each at
// at(id): one statement finds which of them have unresolved edges. It is
// what closes the race of an edge added to a stored job (Edge.Stored)
// whose running delivery did not carry the FlowParent mark: the writer
// serialises the edge's insert with this transaction, which sees it.
func resolveFinished(ctx context.Context, tx Execer, ids []int64, done int8, at func(int64) int64, why string) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.QueryContext(ctx, unresolvedParentsSQL, idsJSON(ids))
	if err != nil {
		return err
	}
	var parents []int64
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return err
		}
		parents = append(parents, p)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	rows.Close()
	slices.Sort(parents)
	for _, p := range parents {
		reason := ""
		if done != 1 {
			reason = fmt.Sprintf(why, p)
		}
		if err := resolveFlow(ctx, tx, p, done, nil, at(p), reason); err != nil {
			return err
		}
	}
	return nil
}

// ParentResults implements store.Flows.
func (s *Store) ParentResults(ctx context.Context, child int64) ([]store.ParentResult, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT parent, mode, done, output FROM lq_deps WHERE child = ? ORDER BY parent`, child)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.ParentResult
	for rows.Next() {
		var r store.ParentResult
		if err := rows.Scan(&r.Parent, &r.Mode, &r.Done, &r.Output); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// FlowGraph implements store.Flows: a walk of the edges from id in both
// directions, in one read transaction.
func (s *Store) FlowGraph(ctx context.Context, id int64, limit int) ([]store.FlowNode, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	return flowGraph(ctx, tx, id, limit)
}

func flowGraph(ctx context.Context, tx *sql.Tx, id int64, limit int) ([]store.FlowNode, error) {
	seen := map[int64]bool{id: true}
	queue := []int64{id}
	var nodes []store.FlowNode
	for len(queue) > 0 && len(nodes) < limit {
		cur := queue[0]
		queue = queue[1:]
		var n store.FlowNode
		var reason sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT id, queue, kind, state, visible_at, waits, dead_reason FROM lq_jobs WHERE id = ?`, cur).
			Scan(&n.ID, &n.Queue, &n.Kind, &n.State, &n.VisibleAt, &n.Waits, &reason)
		if errors.Is(err, sql.ErrNoRows) {
			if cur == id {
				return nil, fmt.Errorf("litequeue: workflow of job %d: %w", id, store.ErrNotFound)
			}
			n = store.FlowNode{ID: cur, State: -1} // deleted (a completed job not retained)
		} else if err != nil {
			return nil, err
		}
		n.Reason = reason.String
		rows, err := tx.QueryContext(ctx, `SELECT parent, mode, done, NULL FROM lq_deps WHERE child = ?1
			UNION ALL SELECT -child, mode, done, NULL FROM lq_deps WHERE parent = ?1`, cur)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var r store.ParentResult
			if err := rows.Scan(&r.Parent, &r.Mode, &r.Done, &r.Output); err != nil {
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

const (
	// flowRevivableSQL lists the children of ?1 that its death (or
	// cancel) cancelled: edges that need its success, marked failed, to a
	// child cancelled by the workflow.
	flowRevivableSQL = `SELECT d.child FROM lq_deps d JOIN lq_jobs j ON j.id = d.child
	WHERE d.parent = ?1 AND d.mode = 0 AND d.done = 2 AND j.state = 4 AND j.dead_reason LIKE 'workflow: parent job %'`
	// flowResetSQL makes the failed edges of ?1 that need its success
	// unfinished again.
	flowResetSQL = `UPDATE lq_deps SET done = 0 WHERE parent = ?1 AND mode = 0 AND done = 2`
	// flowUnmetSQL counts the edges of child ?1 not finished yet, and
	// those that need a success and failed.
	flowUnmetSQL = `SELECT count(CASE WHEN done = 0 THEN 1 END), count(CASE WHEN done = 2 AND mode = 0 THEN 1 END)
	FROM lq_deps WHERE child = ?1`
	flowReviveSQL = `UPDATE lq_jobs SET state = 5, waits = ?2, finished_at = NULL, dead_reason = NULL
	WHERE id = ?1 AND state = 4 RETURNING queue`
)

// reviveFlow, on tx, after the dead job parent was requeued, brings back to
// waiting the dependants that its death cancelled, and theirs
// transitively, each with its count of unmet parents; a dependant that
// another failed parent still blocks stays cancelled.
func reviveFlow(ctx context.Context, tx Execer, parent int64) error {
	work := []int64{parent}
	for i := 0; i < len(work); i++ {
		cur := work[i]
		rows, err := tx.QueryContext(ctx, flowRevivableSQL, cur)
		if err != nil {
			return err
		}
		var children []int64
		for rows.Next() {
			var c int64
			if err := rows.Scan(&c); err != nil {
				rows.Close()
				return err
			}
			children = append(children, c)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		rows.Close()
		if _, err := tx.ExecContext(ctx, flowResetSQL, cur); err != nil {
			return err
		}
		for _, c := range children {
			var unmet, blocked int
			if err := tx.QueryRowContext(ctx, flowUnmetSQL, c).Scan(&unmet, &blocked); err != nil {
				return err
			}
			if blocked > 0 || unmet == 0 {
				continue
			}
			var queue string
			err := tx.QueryRowContext(ctx, flowReviveSQL, c, unmet).Scan(&queue)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if err := moveCount(ctx, tx, countOf(queue, store.Cancelled, 0), countOf(queue, store.Waiting, 0), 1); err != nil {
				return err
			}
			work = append(work, c)
		}
	}
	return nil
}

// requeueWaits tells, on tx, how many parents cancelled job id must wait
// for once requeued (its edges not finished): 0 for a job of no
// workflow. A parent whose success it needs and that died or was cancelled
// is a *store.ParentFailedError.
func requeueWaits(ctx context.Context, tx Execer, id int64) (int, error) {
	var unmet, blocked int
	var parent sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT count(CASE WHEN done = 0 THEN 1 END), count(CASE WHEN done = 2 AND mode = 0 THEN 1 END),
		min(CASE WHEN done = 2 AND mode = 0 THEN parent END) FROM lq_deps WHERE child = ?1`, id).Scan(&unmet, &blocked, &parent)
	if err != nil {
		return 0, err
	}
	if blocked > 0 {
		return 0, &store.ParentFailedError{ID: id, Parent: parent.Int64}
	}
	return unmet, nil
}
