package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Enqueueing: a job is checked and encoded (prepare), stored, and handed
// straight to a waiting worker of this process when one is free.

// minRunAt and maxRunAt bound the times an int64 of Unix nanoseconds holds.
// earliestDue is the earliest due time the queue stores: a RunAt before it
// counts as it, so that every stored time lies between the Unix epoch and
// maxRunAt and any two differ by less than the longest time.Duration.
var (
	minRunAt    = time.Unix(0, -1<<63)
	maxRunAt    = time.Unix(0, 1<<63-1)
	earliestDue = time.Unix(0, 0)
)

func (c *core) prepare(job Job, o *EnqueueOptions) (store.NewJob, error) {
	if job == nil {
		return store.NewJob{}, fmt.Errorf("%w: nil job", ErrInvalidJob)
	}
	if o == nil {
		o = &EnqueueOptions{}
	}
	nj := store.NewJob{Kind: job.Kind(), Queue: o.Queue, Priority: o.Priority, Key: o.Key}
	if nj.Queue == "" {
		nj.Queue = jobQueue(job)
	}
	if err := validName("kind", nj.Kind); err != nil {
		return store.NewJob{}, err
	}
	if err := validName("queue", nj.Queue); err != nil {
		return store.NewJob{}, err
	}
	if err := validText("idempotency key", nj.Key, MaxKeyLen); err != nil {
		return store.NewJob{}, err
	}
	if o.Delay < 0 {
		return store.NewJob{}, fmt.Errorf("%w: negative delay %s; use 0 to run now", ErrInvalidJob, o.Delay)
	}
	if o.Delay != 0 && !o.RunAt.IsZero() {
		return store.NewJob{}, fmt.Errorf("%w: both Delay and RunAt are set; set one", ErrInvalidJob)
	}
	now := c.clock.Now()
	nj.CreatedAt = now.UnixNano()
	due := now
	switch {
	case !o.RunAt.IsZero():
		if o.RunAt.After(maxRunAt) || o.RunAt.Before(minRunAt) {
			return store.NewJob{}, fmt.Errorf("%w: RunAt %s is outside the years 1678–2262 that the queue can store", ErrInvalidJob, o.RunAt)
		}
		due = o.RunAt
		if due.Before(earliestDue) {
			due = earliestDue
		}
	case o.Delay > 0:
		if now.After(maxRunAt.Add(-o.Delay)) {
			return store.NewJob{}, fmt.Errorf("%w: delay %s runs past year 2262", ErrInvalidJob, o.Delay)
		}
		due = now.Add(o.Delay)
	}
	nj.VisibleAt = due.UnixNano()
	payload, err := json.Marshal(job)
	if err != nil {
		return store.NewJob{}, fmt.Errorf("%w: job of kind %q does not encode as JSON: %v", ErrInvalidJob, nj.Kind, err)
	}
	if c.opts.MaxPayloadBytes > 0 && len(payload) > c.opts.MaxPayloadBytes {
		return store.NewJob{}, fmt.Errorf("%w: job of kind %q encodes to %d bytes, over Options.MaxPayloadBytes (%d); store large data elsewhere and enqueue a reference",
			ErrInvalidJob, nj.Kind, len(payload), c.opts.MaxPayloadBytes)
	}
	if err := checkPayloadText(nj.Kind, job, payload); err != nil {
		return store.NewJob{}, err
	}
	nj.Payload = payload
	if err := prepareUnique(job, o, &nj); err != nil {
		return store.NewJob{}, err
	}
	if err := prepareMeta(o, 0, &nj); err != nil {
		return store.NewJob{}, err
	}
	if err := prepareGroup(job, o, &nj); err != nil {
		return store.NewJob{}, err
	}
	return nj, nil
}

// Enqueue stores job and returns its id, which stays the job's identity
// through retries, dead letters and requeues. When Enqueue returns nil the job
// is committed with the queue's Durability. A nil opts means run now with
// priority 0 and no key.
//
// When the job's queue has an idle worker in this process, the enqueue's own
// transaction also claims the new job and hands it to that worker, unless an
// older or more urgent job is due (then a queue file's transaction claims
// that one instead, and a PostgreSQL queue's claims nothing), so a job may
// start before Enqueue returns; whenever the new job was not handed off, the
// queue's dispatcher is woken at once. Either way jobs start in priority,
// then due-time order.
//
// Errors: ErrInvalidJob (nothing written) when the job or opts are invalid;
// ErrStorageFull (nothing written) when the disk is full;
// a *DuplicateError (errors.Is ErrDuplicate) together with the existing job's
// id when opts.Key is held by a live job; ErrClosed, ErrReadOnly.
func (q *Queue) Enqueue(ctx context.Context, job Job, opts *EnqueueOptions) (int64, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	nj, err := q.prepare(job, opts)
	if err != nil {
		return 0, err
	}
	// From the insert's commit on a worker may start the job; it waits for
	// this enqueue's EventEnqueued.
	q.gate.enter(nj)
	reported := false // by the hand-off, which closed the gate
	defer func() {
		if !reported {
			q.gate.leave(nj)
		}
	}()
	enqueued := Event{Type: EventEnqueued, Queue: nj.Queue, Kind: nj.Kind, Delay: time.Duration(nj.VisibleAt - nj.CreatedAt)}
	// A job due now, of a kind whose pool here is idle, is claimed in the
	// same transaction and handed straight to a worker.
	var direct *pool
	if nj.VisibleAt <= nj.CreatedAt {
		q.mu.Lock()
		if q.run != nil {
			direct = q.run.reserveDirect(nj.Queue, nj.Kind)
		}
		q.mu.Unlock()
	}
	var id int64
	var d *delivery
	if direct != nil {
		handed := true
		cq := direct.safeClaimQuery(1)
		id, err = q.store.InsertClaim(ctx, nj, cq, func(cs []store.Claimed) {
			// On the store's commit path, in commit order with the
			// dispatchers' claims.
			if len(cs) > 0 {
				d = direct.delivery(cs[0], cq)
				if cs[0].New && nj.Unique == nil {
					// The new job goes straight to a worker: it is
					// reported first, here, and its worker need not wait
					// for this goroutine.
					reported = true
					enqueued.JobID = d.id
					q.supersedeTx([]int64{d.id})
					q.emit(enqueued)
					q.gate.leave(nj)
				}
				q.claimedTx([]*delivery{d})
				handed = direct.handOff(d)
			}
		})
		direct.unreserve()
		if !handed {
			direct.release([]*delivery{d})
		}
	} else {
		var ids []int64
		var dups []error
		ids, dups, err = q.store.Insert(ctx, store.Tx{}, []store.NewJob{nj})
		if err == nil {
			id, err = ids[0], dups[0]
		}
	}
	if uid, uerr, handled := q.settleUnique(job, opts, &nj, id, err); handled {
		return uid, uerr
	}
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			q.emit(Event{Type: EventDuplicate, JobID: dup.ID, Queue: nj.Queue, Kind: nj.Kind})
			return dup.ID, err
		}
		return 0, wrapf("litequeue: enqueue %s: %w", nj.Kind, err)
	}
	if !reported {
		enqueued.JobID = id
		q.supersedeTx([]int64{id})
		q.emit(enqueued)
	}
	switch {
	case nj.VisibleAt > nj.CreatedAt:
		q.dueAt(nj.Queue, nj.Kind, nj.VisibleAt)
	case d == nil || d.id != id:
		// The job waits in the store: the hand-off took a more urgent one,
		// or none.
		q.wake(nj.Queue)
	}
	return id, nil
}

// EnqueueTx is Enqueue inside the application's transaction tx, on the
// database the queue was made with by New (the transactional outbox): the
// job exists if and only if tx commits. Workers of this process start the
// job promptly after the commit, with no call to Notify: EnqueueTx wakes the
// job's queue at once, and the wake-up's claim waits for the write lock that
// tx holds until it commits or rolls back (a rolled-back job is simply not
// found). Other processes notice the job promptly too (see
// Options.PollInterval).
//
// The job's EventEnqueued comes once the queue sees tx committed, and
// never for a tx that rolled back: when this process claims the job
// (before its EventStarted), or when a watcher of this queue finds out —
// on a queue file once tx has released the write lock, on PostgreSQL by
// tx's transaction id, which EnqueueTx reads on tx (one more statement),
// at least every PollInterval while tx is open.
func (q *Queue) EnqueueTx(ctx context.Context, tx *sql.Tx, job Job, opts *EnqueueOptions) (int64, error) {
	if tx == nil {
		return 0, ErrNoTx
	}
	if err := q.writable(); err != nil {
		return 0, err
	}
	nj, err := q.prepare(job, opts)
	if err != nil {
		return 0, err
	}
	ids, dups, err := q.store.Insert(ctx, store.SQLTx(tx), []store.NewJob{nj})
	if err == nil {
		if uid, uerr, handled := q.settleUnique(job, opts, &nj, ids[0], dups[0]); handled {
			return uid, uerr
		}
	}
	if err == nil && dups[0] != nil {
		return ids[0], dups[0]
	}
	if err != nil {
		return 0, wrapf("litequeue: enqueue %s: %w", nj.Kind, err)
	}
	id := ids[0]
	q.enqueuedTx(ctx, tx, []store.NewJob{nj}, ids, dups)
	// On SQLite tx holds the write lock from the insert until it ends, and a
	// claim begins with BEGIN IMMEDIATE: the claim this wakes runs after tx's
	// commit and sees the job, or after its rollback and finds nothing. On
	// PostgreSQL the commit's notification wakes the workers.
	q.wake(nj.Queue)
	return id, nil
}

// EnqueueBatch stores many jobs in one transaction: all of them or, on error,
// none. ids[i] is the id of items[i]. An item whose key is held by a live job
// (or by an earlier item of the batch) is not inserted; ids[i] is the holder's
// id and the returned error joins a *DuplicateError per such item — the rest
// of the batch is committed. Any other error (including an invalid item,
// reported with its index) commits nothing.
func (q *Queue) EnqueueBatch(ctx context.Context, items []BatchItem) ([]int64, error) {
	if err := q.writable(); err != nil {
		return nil, err
	}
	jobs, err := q.prepareBatch(items)
	if err != nil {
		return nil, err
	}
	q.gate.enter(jobs...)
	defer q.gate.leave(jobs...)
	ids, dups, err := q.store.Insert(ctx, store.Tx{}, jobs)
	if err != nil {
		return nil, wrapf("litequeue: enqueue batch: %w", err)
	}
	q.supersedeTx(ids)
	queues := map[string]bool{}
	for i, nj := range jobs {
		if uid, uerr, handled := q.settleUnique(items[i].Job, items[i].Options, &jobs[i], ids[i], dups[i]); handled {
			if uerr != dups[i] {
				dups[i] = fmt.Errorf("batch item %d: %w", i, uerr)
			}
			ids[i] = uid
			continue
		}
		if dups[i] != nil {
			q.emit(Event{Type: EventDuplicate, JobID: ids[i], Queue: nj.Queue, Kind: nj.Kind})
			continue
		}
		if nj.VisibleAt > nj.CreatedAt {
			q.dueAt(nj.Queue, nj.Kind, nj.VisibleAt)
		} else {
			queues[nj.Queue] = true
		}
		q.emit(Event{Type: EventEnqueued, JobID: ids[i], Queue: nj.Queue, Kind: nj.Kind, Delay: time.Duration(nj.VisibleAt - nj.CreatedAt)})
	}
	for name := range queues {
		q.wake(name)
	}
	return ids, errors.Join(dups...)
}

// EnqueueBatchTx is EnqueueBatch inside the application's transaction tx (see
// EnqueueTx): the jobs exist if and only if tx commits, and this process's
// workers start them promptly after the commit without a call to Notify.
func (q *Queue) EnqueueBatchTx(ctx context.Context, tx *sql.Tx, items []BatchItem) ([]int64, error) {
	if tx == nil {
		return nil, ErrNoTx
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	jobs, err := q.prepareBatch(items)
	if err != nil {
		return nil, err
	}
	ids, dups, err := q.store.Insert(ctx, store.SQLTx(tx), jobs)
	if err != nil {
		return nil, wrapf("litequeue: enqueue batch: %w", err)
	}
	for i := range jobs {
		if uid, uerr, handled := q.settleUnique(items[i].Job, items[i].Options, &jobs[i], ids[i], dups[i]); handled && uerr != dups[i] {
			ids[i], dups[i] = uid, fmt.Errorf("batch item %d: %w", i, uerr)
		}
	}
	q.enqueuedTx(ctx, tx, jobs, ids, dups)
	queues := map[string]bool{}
	for _, nj := range jobs {
		if !queues[nj.Queue] {
			queues[nj.Queue] = true
			q.wake(nj.Queue) // as in EnqueueTx: the claim waits for tx to end
		}
	}
	return ids, errors.Join(dups...)
}

func (q *Queue) prepareBatch(items []BatchItem) ([]store.NewJob, error) {
	jobs := make([]store.NewJob, len(items))
	for i, it := range items {
		nj, err := q.prepare(it.Job, it.Options)
		if err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		jobs[i] = nj
	}
	return jobs, nil
}

// Notify wakes this process's idle workers to look for due jobs now, for
// example after another connection of this process wrote jobs without the
// queue (EnqueueTx and EnqueueBatchTx need no Notify). Without it they
// notice when the queue's watch for other connections' writes does (see
// Options.PollInterval).
func (q *Queue) Notify() {
	q.mu.Lock()
	run := q.run
	q.mu.Unlock()
	if run != nil {
		run.wakeAll()
	}
}

// wake tells the named queue's dispatcher (if running here) to claim.
func (q *Queue) wake(queue string) {
	q.mu.Lock()
	run := q.run
	q.mu.Unlock()
	if run != nil {
		run.wake(queue)
	}
}

// dueAt sets the wake-up of the named queue's dispatcher (if it runs here
// and handles kind) to claim at the Unix nanosecond due, unless it is set
// earlier: a delayed job starts on time without a dispatcher round trip.
func (q *Queue) dueAt(queue, kind string, due int64) {
	q.mu.Lock()
	run := q.run
	q.mu.Unlock()
	if run != nil {
		run.dueAt(queue, kind, due)
	}
}

// dueAt sets the wake-up of the named queue's pool, if it handles kind, to
// claim at the Unix nanosecond due, unless it is set earlier.
func (r *runState) dueAt(queue, kind string, due int64) {
	if p, ok := r.pools[queue]; ok && p.kinds[kind] {
		p.dueAt(time.Unix(0, due))
	}
}

// settleUnique reports the uniqueness outcome of an insert of nj (from job
// with o) that returned id and err, and returns what the enqueue returns.
// handled is false when err is not a uniqueness conflict.
func (q *Queue) settleUnique(job Job, o *EnqueueOptions, nj *store.NewJob, id int64, err error) (int64, error, bool) {
	if nj.Unique == nil {
		return id, err, false
	}
	var ue *UniqueError
	if errors.As(err, &ue) {
		q.emit(Event{Type: EventDuplicate, JobID: ue.ID, Queue: nj.Queue, Kind: nj.Kind, Err: err})
		if u := uniqueOptionsOf(job, o); u != nil && u.OnConflict == ConflictReject {
			return 0, wrapf("%w: %w", ErrUniqueRejected, ue), true
		}
		return ue.ID, err, true
	}
	if err == nil && nj.Unique.Replaced != 0 {
		q.emit(Event{Type: EventReplaced, JobID: nj.Unique.Replaced, Queue: nj.Queue, Kind: nj.Kind})
	}
	return id, err, false
}

type uniquer interface{ UniqueOptions() *UniqueOptions }

// uniqueOptionsOf returns the uniqueness in force for an enqueue of job with
// o: o.Unique, else the job type's, else nil.
func uniqueOptionsOf(job Job, o *EnqueueOptions) *UniqueOptions {
	if o != nil && o.Unique != nil {
		return o.Unique
	}
	if u, ok := job.(uniquer); ok {
		return u.UniqueOptions()
	}
	return nil
}

// prepareUnique sets nj.Unique from the uniqueness in force for job with o.
func prepareUnique(job Job, o *EnqueueOptions, nj *store.NewJob) error {
	u := uniqueOptionsOf(job, o)
	if u == nil {
		return nil
	}
	su, err := uniqueFor(u, nj)
	if err != nil {
		return err
	}
	nj.Unique = su
	return nil
}
