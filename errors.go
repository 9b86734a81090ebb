package litequeue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// Errors returned by the queue. Compare with errors.Is; several are wrapped
// with detail about the file, job or option at fault.
var (
	// ErrNotSQLite: the file exists but is not a SQLite database. The file is
	// left untouched.
	ErrNotSQLite = store.ErrNotSQLite
	// ErrCorrupt: the file is a SQLite database (or starts like one) but is
	// damaged, for example truncated. The file is left untouched; restore it
	// from a backup.
	ErrCorrupt = store.ErrCorrupt
	// ErrNotLitequeue: the file is a SQLite database of another application.
	// The file is left untouched.
	ErrNotLitequeue = store.ErrNotLitequeue
	// ErrSchemaTooNew: the file was written by a newer litequeue whose schema
	// this build does not know. Upgrade litequeue; the file is left untouched.
	ErrSchemaTooNew = store.ErrSchemaTooNew
	// ErrStorageFull: a write failed because the disk (or SQLite's size
	// limit) is full. Nothing of the failed call was written and nothing
	// already committed is lost; free space and retry.
	ErrStorageFull = store.ErrStorageFull
	// ErrClosed: the queue was closed.
	ErrClosed = store.ErrClosed
	// ErrReadOnly: a write was attempted on a queue opened with
	// Options.ReadOnly.
	ErrReadOnly = store.ErrReadOnly
	// ErrDuplicate: an enqueue named the idempotency key of a job that is
	// still pending, scheduled or running. Nothing was enqueued; the returned
	// id is the existing job's. The error is a *DuplicateError.
	ErrDuplicate = store.ErrDuplicate
	// ErrInvalidJob: a job or its EnqueueOptions was rejected before anything
	// was written (bad kind or queue name, payload too large or not
	// encodable, negative delay, …). The error says what and how to fix it.
	ErrInvalidJob = errors.New("litequeue: invalid job")
	// ErrNotFound: no job (or dead letter) has the given id.
	ErrNotFound = store.ErrNotFound
	// ErrJobRunning: the operation needs a job that is not running and the
	// job holds a live lease. (Cancel does not return it: it cancels
	// running jobs too.)
	ErrJobRunning = store.ErrJobRunning
	// ErrLeaseLost: the delivery's lease expired and the job was claimed
	// again or removed; this worker's result no longer counts.
	ErrLeaseLost = store.ErrLeaseLost
	// ErrQueueStopped: the cause (context.Cause) with which a running
	// handler's context is cancelled when Stop's context ends (or Start's
	// context is cancelled) before the handler returned. Its job was
	// released — ready again, the attempt given back, reported as
	// EventReleased — and what the handler returns is dropped. A handler
	// that already called CompleteTx is cancelled too but not released: its
	// transaction decides the outcome.
	ErrQueueStopped = errors.New("litequeue: queue stopped")
	// ErrOutcomeRefused: the store refused, again and again, to record a
	// failed attempt's outcome (its retry, dead letter or snooze) for a
	// reason other than a failing device. Rather than keep the job running
	// and write the outcome again forever, the queue made it a dead letter
	// with reason "outcome refused: …"; OnDead and EventDead get an error
	// wrapping ErrOutcomeRefused and what the store answered.
	ErrOutcomeRefused = errors.New("litequeue: the store refused to record the attempt's outcome")
	// ErrAlreadyStarted: Start was called on a running queue.
	ErrAlreadyStarted = errors.New("litequeue: queue already started")
	// ErrNoTx: EnqueueTx or CompleteTx was given a nil transaction.
	ErrNoTx = errors.New("litequeue: nil transaction")
	// ErrQueueConfig: with Options.StrictQueues, Start found a handled queue
	// without a QueueConfig or a QueueConfig no handler uses. The error is a
	// *QueueConfigError (one per queue, joined).
	ErrQueueConfig = errors.New("litequeue: queue configuration does not match the handlers")
	// ErrNetworkFileSystem: Open (or New) refused a queue file on a network
	// file system (NFS, SMB/CIFS, AFS, 9P, …; told by statfs on Linux,
	// macOS and FreeBSD, by a UNC path on Windows), where SQLite's WAL mode
	// cannot share its index and locks between processes and the file
	// would be corrupted or stay locked. Nothing was written. Put the file
	// on a local disk; to share jobs between machines, use PostgreSQL.
	// Read-only opens are not refused.
	ErrNetworkFileSystem = sqlite.ErrNetworkFileSystem
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
// idempotency key belongs to a live job: Key is the key, ID the id of the
// live job holding it (also returned as the id). errors.Is(err,
// ErrDuplicate) holds for it.
type DuplicateError = store.DuplicateError

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

// Error returns the wrapped error's message, unchanged: the delay is
// recorded apart — in the attempt's history, EventRetrying's Delay and the
// log record's delay — so the message, which a handler often words with
// the delay already, does not say it again. A nil Err gives "retry after"
// and the delay.
func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %s", e.Delay)
	}
	return e.Err.Error()
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
var ErrWrongState = store.ErrWrongState

// TimeoutError is the cause with which a handler's context is cancelled when
// its attempt's timeout passes — the job type's Timeout, else its queue's
// QueueConfig.Timeout — (context.Cause), and the failure
// recorded for that attempt. errors.Is(err, context.DeadlineExceeded) holds
// for it.
type TimeoutError struct {
	Timeout time.Duration // the timeout in force: the job type's or the queue's
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("job timeout %s passed", e.Timeout) }

// Is reports whether target is context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Storage faults a write can meet besides a full disk (ErrStorageFull).
var (
	// ErrStorageIO: the operating system reported an I/O error while the
	// queue wrote or synced its file (a failing disk, a lost network
	// mount). The call's transaction was rolled back: nothing of it was
	// written, and what was committed before is kept. Retry once the
	// device works again; the queue needs no reopen.
	ErrStorageIO = store.ErrStorageIO
	// ErrFileReplaced: the queue file was removed, renamed or replaced by
	// another file while a queue made by Open had it open. The queue then
	// writes nothing, so no job goes into a file that no one can open
	// again: every write fails with this error. Put the file back under its
	// name to go on, or Close the queue and Open the path again.
	ErrFileReplaced = store.ErrFileReplaced
)

// errPrefix begins the text of every error of the package.
const errPrefix = "litequeue: "

// wrapf is fmt.Errorf for errors that wrap the package's own errors, whose
// texts begin with errPrefix too: the prefix is said once, at the start
// ("litequeue: requeue job 9: job not found", not "litequeue: requeue job 9:
// litequeue: job not found"). errors.Is and errors.As see what fmt.Errorf's
// %w verbs wrap.
func wrapf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, errPrefix); ok {
		for strings.HasPrefix(rest, errPrefix) {
			rest = rest[len(errPrefix):]
		}
		msg = errPrefix + strings.ReplaceAll(rest, ": "+errPrefix, ": ")
	}
	return &prefixedError{msg: msg, err: err}
}

// prefixedError is an error of wrapf: its text with the prefix said once.
type prefixedError struct {
	msg string
	err error // what fmt.Errorf made
}

func (e *prefixedError) Error() string { return e.msg }

// Unwrap returns what the format's %w verbs wrapped.
func (e *prefixedError) Unwrap() []error {
	switch u := e.err.(type) {
	case interface{ Unwrap() error }:
		return []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// ErrJobCancelled is the cause with which a running handler's context is
// cancelled when its job is cancelled (by Cancel here or in another
// process, or by lqinspect cancel): errors.Is(context.Cause(ctx),
// ErrJobCancelled) tells it from a shutdown, a timeout or a lost lease.
var ErrJobCancelled = errors.New("litequeue: job cancelled")
