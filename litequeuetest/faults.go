package litequeuetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/kitlink"
	"github.com/litequeue/litequeue/internal/store"
)

// Fault injection: at-least-once delivery means a handler may run again
// after its effects happened — when the process dies between the handler's
// return and the commit of its outcome, the job comes back when its lease
// ends. These faults make that happen on purpose, on the real queue, so a
// test can show that a handler is idempotent and that the code that
// enqueues copes with a store that fails.

// faults are the armed outcome faults of a Kit; k.mu guards them.
type faults struct {
	lose       map[int64]bool  // LoseOutcome: the next outcome of these jobs is lost
	twice      map[int64]bool  // DeliverTwice: the next success of these jobs is lost
	twiceKinds map[string]bool // DeliverEachTwice: the first success of every job of these kinds is lost
	kindUsed   map[string]bool // the kinds whose rule lost a success
	twiceDone  map[int64]bool  // jobs whose success a kind's rule lost already
	crashed    map[int64]bool  // jobs whose running attempt crashed at CompleteTx: its outcome is lost
}

// ErrSimulatedCrash is what Delivery.CompleteTx returns (wrapped) in the
// attempt that Kit.DeliverTwice or Kit.DeliverEachTwice crashes before its
// transaction's commit: the transaction is rolled back already.
var ErrSimulatedCrash = errors.New("litequeuetest: simulated crash before the transaction's commit (Kit.DeliverTwice); the transaction was rolled back")

// LoseOutcome makes the next attempt of job id end as if its process died
// the moment its handler returned: the handler runs to the end — its
// effects happen — but its outcome, success or failure, is never written
// and no event reports it. The job's row stays running until its lease
// (QueueConfig.VisibilityTimeout) ends on the kit's clock, exactly as after
// a crash; then the job comes back as its next attempt, with
// Delivery.LastError "lease expired: the worker of attempt N was lost". If
// the lost attempt was the last of the job's retry policy, the job becomes
// a dead letter instead, with reason "attempts used up: attempt N of N was
// lost with its process (lease expired)", without running again. Drain,
// Next and Settle treat the lease's end as the job's due time, and
// DrainResult.Lost counts the loss. (A handler that completed with
// Delivery.CompleteTx and committed has completed its job by then: nothing
// comes back. DeliverTwice crashes such a handler before its commit.)
//
// Arm it before the attempt starts: before Drain, Next, Settle or Start for
// a job due now (a started queue may run a job before Enqueue returns). A
// LoseOutcome that no attempt used by the end of the test fails the test.
func (k *Kit) LoseOutcome(id int64) {
	arm(k, &k.faults.lose, id)
}

// DeliverTwice makes job id run again after it succeeded: the success of
// its next successful attempt is lost with its process (see LoseOutcome),
// so the job comes back when its lease ends and runs as its next attempt —
// the double delivery of at-least-once delivery, after the first run's
// effects. A handler that is not idempotent shows its effect twice; one
// that is (a key checked in the same transaction as the effect, say) does
// not. Attempts that fail before the first success are recorded as usual.
//
// A handler that completes its job with Delivery.CompleteTx cannot be
// delivered again once its transaction committed: the commit completed the
// job. Its duplicate is the other one at-least-once delivery makes: the
// process dies before the commit. So when the handler of the next attempt
// calls CompleteTx, the kit crashes it there: the transaction is rolled
// back (the handler's writes in it are undone), CompleteTx returns an
// error wrapping ErrSimulatedCrash (return it, as after any failed
// CompleteTx; what the handler does after it, a real crash would not have
// done), and the attempt's outcome, whatever the handler returns, is lost.
// The job comes back when its lease ends and runs again; what the first run
// did outside its transaction before CompleteTx happened twice.
//
// The second delivery needs an attempt left in the job's retry policy.
// When the success comes on the policy's last attempt, a lost success would
// make the job a dead letter, not a second delivery: then DeliverTwice
// leaves the success alone and fails the test, saying so. Give the job's
// queue (or job type) a RetryPolicy with more attempts. Arm it as
// LoseOutcome; one no success used by the end of the test fails the test.
func (k *Kit) DeliverTwice(id int64) {
	arm(k, &k.faults.twice, id)
}

// DeliverEachTwice is DeliverTwice for every job of kind (the Job's Kind())
// that succeeds from now on until ClearFaults: each one's first success is
// lost and the job runs again. It needs no job id, so it also covers jobs
// that handlers or the code under test enqueue. If no job of kind had its
// success lost by the end of the test, the test fails.
func (k *Kit) DeliverEachTwice(kind string) {
	arm(k, &k.faults.twiceKinds, kind)
}

// arm adds key to the armed set *set of k's faults, under k.mu.
func arm[K comparable](k *Kit, set *map[K]bool, key K) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if *set == nil {
		*set = map[K]bool{}
	}
	(*set)[key] = true
}

// FailWrites makes the queue's next n writes to its file fail with err, as
// the SQLite store fails them: litequeue.ErrStorageFull for a full disk
// (the error text is SQLite's "database or disk is full"),
// litequeue.ErrStorageIO, litequeue.ErrFileReplaced, or any other error,
// wrapped so that errors.Is(returned, err) holds. With n < 0 every write
// fails until ClearFaults or FailWrites(nil, 0); n == 0 (or a nil err)
// stops failing writes. A failed write changes nothing, as a transaction
// that meets a full disk is rolled back, and reads work as before.
//
// Every write of the queue counts, in the order the queue makes them:
// enqueues (Enqueue returns the error and stores nothing), but also, on a
// started queue, the workers' claims (retried a second later, or at once
// when Drain nudges the queue), lease extensions and the outcomes of
// attempts. An outcome that cannot be written is kept by the queue, as on
// a real device that fails for a moment: the job keeps its lease and the
// outcome is written at the next claim (Drain nudges the queue) — the
// handler does not run again and no attempt is used twice. To fail only
// the code under test's enqueues, arm FailWrites while nothing runs.
//
// Drain, Next and Settle return an error wrapping ErrStuck when every write
// fails and a due job cannot be claimed or a kept outcome written. A FailWrites whose writes did not
// all fail by the end of the test (or, with n < 0, none did) fails the test.
func (k *Kit) FailWrites(err error, n int) {
	k.writes.arm(err, n)
}

// ClearFaults disarms every fault: LoseOutcome, DeliverTwice and
// DeliverEachTwice that have not struck yet, and FailWrites. Outcomes lost
// already stay lost: their jobs come back when their leases end; outcomes
// kept because their writes failed are written at the next claim.
func (k *Kit) ClearFaults() {
	k.mu.Lock()
	k.faults = faults{}
	k.mu.Unlock()
	k.writes.arm(nil, 0)
}

// crashTx decides, when a handler calls CompleteTx on tx for the attempt
// holding l, whether DeliverTwice or DeliverEachTwice crashes the attempt
// there: then it rolls tx back and returns the error CompleteTx returns.
func (k *Kit) crashTx(ctx context.Context, tx *sql.Tx, l store.Lease) error {
	k.mu.Lock()
	f := &k.faults
	armed := f.twice[l.ID] || len(f.twiceKinds) > 0
	k.mu.Unlock()
	if !armed {
		return nil
	}
	j, err := k.Queue.Job(ctx, l.ID)
	if err != nil {
		return nil // CompleteTx reports what is wrong
	}
	k.mu.Lock()
	if !k.takeTwice(l.ID, j.Kind) {
		k.mu.Unlock()
		return nil
	}
	if f.crashed == nil {
		f.crashed = map[int64]bool{}
	}
	f.crashed[l.ID] = true
	k.mu.Unlock()
	tx.Rollback()
	return ErrSimulatedCrash
}

// takeTwice consumes the DeliverTwice or DeliverEachTwice fault armed for
// job id of kind, under k.mu, and reports whether there was one.
func (k *Kit) takeTwice(id int64, kind string) bool {
	f := &k.faults
	byID := f.twice[id]
	byKind := f.twiceKinds[kind] && !f.twiceDone[id]
	if !byID && !byKind {
		return false
	}
	delete(f.twice, id)
	if byKind {
		if f.twiceDone == nil {
			f.twiceDone, f.kindUsed = map[int64]bool{}, map[string]bool{}
		}
		f.twiceDone[id] = true
		f.kindUsed[kind] = true
	}
	return true
}

// drop decides, when a handler has returned, whether its outcome is lost.
func (k *Kit) drop(o kitlink.Outcome) bool {
	k.mu.Lock()
	f := &k.faults
	if f.lose[o.ID] {
		delete(f.lose, o.ID)
		k.mu.Unlock()
		return true
	}
	last := o.Attempt >= o.MaxAttempts
	if f.crashed[o.ID] {
		// Crashed at CompleteTx: the process is gone, whatever the handler
		// returned.
		delete(f.crashed, o.ID)
		k.mu.Unlock()
		if last {
			k.t.Errorf("litequeuetest: DeliverTwice: job %d (%s) crashed before its CompleteTx commit on its last attempt (%d of %d), so it becomes a dead letter, not a second delivery. Give the queue %q (or the job type) a RetryPolicy with more attempts",
				o.ID, o.Kind, o.Attempt, o.MaxAttempts, o.Queue)
		}
		return true
	}
	if o.Err != nil || (!f.twice[o.ID] && !(f.twiceKinds[o.Kind] && !f.twiceDone[o.ID])) {
		k.mu.Unlock()
		return false
	}
	if last {
		// Leave the fault armed for nothing: the success is recorded.
		delete(f.twice, o.ID)
		if f.twiceKinds[o.Kind] {
			if f.twiceDone == nil {
				f.twiceDone, f.kindUsed = map[int64]bool{}, map[string]bool{}
			}
			f.twiceDone[o.ID] = true
		}
	} else {
		k.takeTwice(o.ID, o.Kind)
	}
	k.mu.Unlock()
	if last {
		k.t.Errorf("litequeuetest: DeliverTwice: job %d (%s) succeeded on its last attempt (%d of %d), so a lost success would make it a dead letter, not a second delivery; the success was recorded. Give the queue %q (or the job type) a RetryPolicy with more attempts",
			o.ID, o.Kind, o.Attempt, o.MaxAttempts, o.Queue)
		return false
	}
	return true
}

// noteLost records an attempt whose outcome the queue did not write.
func (k *Kit) noteLost(o kitlink.Outcome) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lost = append(k.lost, o)
	if k.orphans == nil {
		k.orphans = map[int64]int{}
	}
	k.orphans[o.ID] = o.Attempt
	if o.Started {
		// Its EventStarted may still be on its way to record.
		if k.open[o.ID] > 0 {
			k.open[o.ID]--
			k.openN--
		} else {
			if k.early == nil {
				k.early = map[int64]int{}
			}
			k.early[o.ID]++
		}
	}
	k.changedLocked()
}

// tick records progress that is not an event (a failed write).
func (k *Kit) tick() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changedLocked()
}

func (k *Kit) changedLocked() {
	k.ticks++
	close(k.changed)
	k.changed = make(chan struct{})
}

// progress returns the progress count and a channel closed at the next
// progress.
func (k *Kit) progress() (int, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ticks, k.changed
}

// orphaned corrects l for the jobs whose outcome was lost and whose row is
// still running under the lost attempt's lease: no worker holds them, so
// they are not busy but due at their lease's end — unless that end has
// come, and they wait to be claimed like any due job.
func (k *Kit) orphaned(ctx context.Context, l *kitlink.Load) error {
	k.mu.Lock()
	orphans := maps.Clone(k.orphans)
	k.mu.Unlock()
	now := k.Clock.Now()
	for id, attempt := range orphans {
		j, err := k.Queue.Job(ctx, id)
		if err != nil && !errors.Is(err, litequeue.ErrNotFound) {
			return err
		}
		if err != nil || j.State != litequeue.StateRunning || j.Attempt != attempt {
			// Claimed again, or finished (a CompleteTx committed before the
			// loss, a cancel): nothing waits for this lease any more.
			k.mu.Lock()
			if k.orphans[id] == attempt {
				delete(k.orphans, id)
			}
			k.mu.Unlock()
			continue
		}
		if !j.VisibleAt.After(now) {
			continue // the lease has ended: due now, counted as busy
		}
		l.Busy--
		if !l.HasNext || j.VisibleAt.Before(l.Next) {
			l.Next, l.HasNext = j.VisibleAt, true
		}
	}
	return nil
}

// reportUnusedFaults fails the test for every armed fault that never
// struck: a fault test whose fault did not happen proves nothing.
func (k *Kit) reportUnusedFaults() {
	k.mu.Lock()
	var msgs []string
	for _, id := range slices.Sorted(maps.Keys(k.faults.lose)) {
		msgs = append(msgs, fmt.Sprintf("Kit.LoseOutcome(%d): job %d ran no attempt after it was armed", id, id))
	}
	for _, id := range slices.Sorted(maps.Keys(k.faults.twice)) {
		msgs = append(msgs, fmt.Sprintf("Kit.DeliverTwice(%d): job %d did not succeed after it was armed", id, id))
	}
	for _, kind := range slices.Sorted(maps.Keys(k.faults.twiceKinds)) {
		if !k.faults.kindUsed[kind] {
			msgs = append(msgs, fmt.Sprintf("Kit.DeliverEachTwice(%q): no job of that kind succeeded with an attempt left to deliver it again", kind))
		}
	}
	k.mu.Unlock()
	if m := k.writes.unused(); m != "" {
		msgs = append(msgs, m)
	}
	if len(msgs) > 0 {
		k.t.Errorf("litequeuetest: faults armed but never struck (arm a fault before the attempt it is for starts, or call Kit.ClearFaults):\n  %s", strings.Join(msgs, "\n  "))
	}
}
