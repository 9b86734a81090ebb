package litequeue

import (
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Outcomes: what became of one attempt, as one value that record writes and
// reports — the store's write, the events, this process's progress
// watchers, the slot freed — and, when the write fails, keeps to be written
// again by the same write (record.go).

// outcomeKind says what became of an attempt.
type outcomeKind uint8

const (
	// outSucceeded: the handler returned nil; the success is written in the
	// store's next batch of completions.
	outSucceeded outcomeKind = iota
	// outSucceededTx: the handler put its success into the caller's
	// transaction (CompleteTx); it holds if that transaction committed.
	outSucceededTx
	// outRetry: the attempt failed; the job runs again after delay.
	outRetry
	// outDead: the job is a dead letter, for its burial's reason.
	outDead
	// outSnoozed: the job runs again after delay without using its attempt.
	outSnoozed
	// outCancelled: the job was cancelled; the handler's result is dropped.
	outCancelled
	// outRelease: the job is given back now without using an attempt (a
	// pause before its handler started).
	outRelease
	// outReleased: the job was given back by Stop or a pause, whose release
	// reported it; the handler's result is dropped.
	outReleased
	// outLeaseLost: the lease was lost before the outcome; the handler's
	// result is dropped.
	outLeaseLost
	// outNotWritten: the outcome is lost with its process (the test kit's
	// fault): nothing is written, the row stays running until its lease
	// ends, and the job runs again.
	outNotWritten
)

// outcome is what became of one attempt, with all its record needs.
type outcome struct {
	kind   outcomeKind
	ran    bool          // its handler ran (false: decided before it started)
	err    error         // the handler's error; the cause of a retry or dead letter
	took   time.Duration // how long the handler ran
	policy RetryPolicy   // the retry policy in force for the job

	// Decided once, when the outcome is made, so that a write tried again
	// (record.go) records the same: jitter is drawn and OnDead asked once.
	at       int64         // outSucceeded: when it completed, in Unix nanoseconds
	decision Decision      // outRetry, outDead, outSnoozed
	delay    time.Duration // outRetry, outSnoozed
	retry    store.Retry   // outRetry
	burial   store.Burial  // outDead
	snooze   store.Snooze  // outSnoozed
	// lostJob marks the outDead of a job whose last allowed attempt was lost
	// with its process: a lost lease is only logged, and the store's refusal
	// never replaces it.
	lostJob bool

	tries   int           // failed writes so far (record.go)
	asked   bool          // OnDead was asked for refusal's follow-up
	refusal *store.NewJob // the follow-up of the dead letter that replaces a refused outcome
}

// refusable reports whether o is a failed attempt's outcome that a dead
// letter replaces when the store keeps refusing it (record.go).
func (o *outcome) refusable() bool {
	return (o.kind == outRetry || o.kind == outDead || o.kind == outSnoozed) && !o.lostJob
}

// writeFailed is what the log says when o's first write fails.
func (o *outcome) writeFailed() string {
	switch {
	case o.lostJob:
		return "dead-lettering a lost job failed"
	case o.kind == outSnoozed:
		return "recording a snooze failed"
	}
	return "recording a failure failed"
}

// The stored attempts of the test kit (testsupport.go) record their
// outcomes through these.
