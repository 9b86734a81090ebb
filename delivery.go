package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// A delivery: one claimed job handed to its handler (Delivery), and what the
// handler may do with it beyond returning.

// Delivery is one attempt at a job, handed to its handler.
type Delivery[J Job] struct {
	// Job is the decoded payload.
	Job J
	// ID is the job's stable identity, the same on every attempt.
	ID int64
	// Queue and Kind are where the job lives and what runs it.
	Queue, Kind string
	// Attempt is this attempt's number: 1 on the first try.
	Attempt int
	// MaxAttempts is the policy's total attempts in force for the job.
	MaxAttempts int
	// Priority is the job's priority (lower runs first).
	Priority int
	// Key is the job's idempotency key, empty if none.
	Key string
	// EnqueuedAt is when the job was first enqueued.
	EnqueuedAt time.Time
	// LastError is the error of the previous attempt, empty on the first.
	LastError string
	// Tags and Metadata are what the enqueue attached (EnqueueOptions); nil
	// if none. Read them, do not change them: they are shared.
	Tags     []string
	Metadata map[string]string
	// Trace is the W3C trace context of the enqueue (EnqueueOptions.Trace);
	// zero if none.
	Trace TraceContext
	// Occurrence is, for a job a schedule enqueued, the scheduled time of
	// the occurrence this job runs for (the same on every attempt); zero
	// for other jobs.
	Occurrence time.Time

	d *delivery
}

func (d *delivery) info() JobInfo {
	m := d.metadata()
	return JobInfo{
		ID: d.id, Queue: d.queue, Kind: d.kind, State: StateRunning, Attempt: d.attempt,
		Priority: d.priority, Key: d.key, Payload: json.RawMessage(d.payload),
		CreatedAt: time.Unix(0, d.createdAt), LastError: d.lastErr,
		Tags: m.tags, Metadata: m.metadata, Trace: m.trace, Occurrence: m.occurrence,
	}
}

// metadata decodes the delivery's job metadata.
func (d *delivery) metadata() jobMeta { return decodeMeta(d.meta) }

func (d *delivery) completeTx(ctx context.Context, tx *sql.Tx) error {
	if d.q.store == nil { // a delivery made for a test, with no queue behind it
		return wrapf("litequeue: complete job %d: %w", d.id, ErrLeaseLost)
	}
	var keepAt int64
	keep := d.q.opts.retention(d.q.config(d.queue), store.Completed)
	if keep > 0 {
		keepAt = unixNanos(d.q.clock)
	}
	if err := d.q.store.CompleteTx(ctx, store.SQLTx(tx), store.Lease{ID: d.id, Lease: d.lease}, keepAt); err != nil {
		return wrapf("litequeue: complete job %d: %w", d.id, err)
	}
	if keepAt != 0 {
		d.q.noteRetained(keepAt, keep)
	}
	// The success is the caller's commit now: a lease extension that finds
	// the row completed before the handler returns is that commit, not a
	// lost lease.
	d.completeInTx()
	return nil
}
