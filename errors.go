package litequeue

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors returned by the queue. Compare with errors.Is; several are wrapped
// with detail about the file, job or option at fault.
var (
	// ErrNotSQLite: the file exists but is not a SQLite database. The file is
	// left untouched.
	ErrNotSQLite = errors.New("litequeue: file is not a SQLite database")
	// ErrCorrupt: the file is a SQLite database (or starts like one) but is
	// damaged, for example truncated. The file is left untouched; restore it
	// from a backup.
	ErrCorrupt = errors.New("litequeue: queue file is damaged (truncated or corrupt)")
	// ErrNotLitequeue: the file is a SQLite database of another application.
	// The file is left untouched.
	ErrNotLitequeue = errors.New("litequeue: SQLite file is not a litequeue queue file")
	// ErrSchemaTooNew: the file was written by a newer litequeue whose schema
	// this build does not know. Upgrade litequeue; the file is left untouched.
	ErrSchemaTooNew = errors.New("litequeue: queue file has a newer schema version than this build supports")
	// ErrStorageFull: a write failed because the disk (or SQLite's size
	// limit) is full. Nothing of the failed call was written and nothing
	// already committed is lost; free space and retry.
	ErrStorageFull = errors.New("litequeue: disk full")
	// ErrClosed: the queue was closed.
	ErrClosed = errors.New("litequeue: queue is closed")
	// ErrReadOnly: a write was attempted on a queue opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("litequeue: queue is opened read-only")
	// ErrDuplicate: an enqueue named the idempotency key of a job that is
	// still pending, scheduled or running. Nothing was enqueued; the returned
	// id is the existing job's. The error is a *DuplicateError.
	ErrDuplicate = errors.New("litequeue: a live job already has this idempotency key")
	// ErrInvalidJob: a job or its EnqueueOptions was rejected before anything
	// was written (bad kind or queue name, payload too large or not
	// encodable, negative delay, …). The error says what and how to fix it.
	ErrInvalidJob = errors.New("litequeue: invalid job")
	// ErrNotFound: no job (or dead letter) has the given id.
	ErrNotFound = errors.New("litequeue: job not found")
	// ErrJobRunning: the operation needs a job that is not running (for
	// example Cancel) and the job holds a live lease.
	ErrJobRunning = errors.New("litequeue: job is running")
	// ErrLeaseLost: the delivery's lease expired and the job was claimed
	// again or removed; this worker's result no longer counts.
	ErrLeaseLost = errors.New("litequeue: lease lost")
	// ErrAlreadyStarted: Start was called on a running queue.
	ErrAlreadyStarted = errors.New("litequeue: queue already started")
	// ErrNoTx: EnqueueTx or CompleteTx was given a nil transaction.
	ErrNoTx = errors.New("litequeue: nil transaction")
	// ErrQueueConfig: with Options.StrictQueues, Start found a handled queue
	// without a QueueConfig or a QueueConfig no handler uses. The error is a
	// *QueueConfigError (one per queue, joined).
	ErrQueueConfig = errors.New("litequeue: queue configuration does not match the handlers")
)

// QueueConfigError names a queue whose configuration does not match the
// registered handlers (see Options.StrictQueues). errors.Is(err,
// ErrQueueConfig) holds for it.
type QueueConfigError struct {
	Queue   string
	Problem string
}

func (e *QueueConfigError) Error() string {
	return fmt.Sprintf("litequeue: queue %q %s", e.Queue, e.Problem)
}

// Is reports whether target is ErrQueueConfig.
func (e *QueueConfigError) Is(target error) bool { return target == ErrQueueConfig }

// DuplicateError is returned with ErrDuplicate semantics when an enqueue's
// idempotency key belongs to a live job.
type DuplicateError struct {
	Key string // the idempotency key
	ID  int64  // the id of the live job holding it, also returned as the id
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("litequeue: idempotency key %q is held by live job %d; nothing was enqueued", e.Key, e.ID)
}

// Is reports ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + errString(e.err) }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that the queue gives up on the job at once, whatever
// attempts its policy has left: the job goes to the dead letters with reason
// "permanent". Use it for failures a retry cannot fix (bad input, a
// violated invariant, an authorization failure). Permanent(nil) returns a
// non-nil error that still gives up.
func Permanent(err error) error { return &permanentError{err: err} }

// IsPermanent reports whether err, or any error it wraps, was made by
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryAfterError asks for the next attempt after a given delay instead of
// the policy's backoff. Make one with RetryAfter.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %s", e.Delay, errString(e.Err))
}
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err so that, if the job has attempts left, the next attempt
// runs after d (for example a rate limit's Retry-After) instead of the
// policy's backoff. It does not add attempts: with none left the job still
// gives up. A negative d acts as 0.
func RetryAfter(d time.Duration, err error) error {
	return &RetryAfterError{Delay: max(d, 0), Err: err}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// ErrWrongState: the job exists but is not in a state the operation accepts
// (for example requeueing a job that is not dead).
var ErrWrongState = errors.New("litequeue: job is not in the required state")

// TimeoutError is the cause with which a handler's context is cancelled when
// its queue's QueueConfig.Timeout passes (context.Cause), and the failure
// recorded for that attempt. errors.Is(err, context.DeadlineExceeded) holds
// for it.
type TimeoutError struct {
	Timeout time.Duration // the queue's Timeout
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("job timeout %s passed", e.Timeout) }

// Is reports whether target is context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
