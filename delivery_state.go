package litequeue

// A delivery's state: where one claimed job of this process is in its life.
// Each delivery has exactly one state, changed only by the transitions
// listed at the end of this file (start, decideUnstarted, completeInTx,
// returned, the releases, markCancelled, markLost, txEnded), each an atomic
// compare-and-swap from the states it may leave, so
// that the worker, the lease extender, Stop and Cancel, which race for the
// same delivery, agree on which of them decides what becomes of it:
//
//	queued ──start──▶ running ──CompleteTx──▶ inTx ──extension finds the row gone──▶ txEnded
//	   │                 │                      │                                       │
//	   │                 └─────────────┬────────┴───────── handler returned ────────────┘
//	   │                               ▼
//	   │                           returned: the outcome is written (or kept unwritten) and reported
//	   ├──(no handler runs: a payload that does not decode, attempts used up)──▶ returned
//	   │
//	   └──(queued or running)──▶ released (Stop, a pause)   — reported EventReleased by the release
//	                        ──▶ lost (an extension)        — reported EventStale when the handler returns
//	   (queued … txEnded) ────▶ cancelled (Cancel)         — reported EventCancelled when the handler returns
//
// Once a delivery has returned, only its outcome's write reports what
// became of it: a lease extension that finds its row gone (the outcome was
// written meanwhile) changes nothing and warns of nothing.
type deliveryState int32

const (
	// dQueued: claimed, waiting for a worker.
	dQueued deliveryState = iota
	// dRunning: its handler runs.
	dRunning
	// dInTx: its handler runs and has put its success into the caller's
	// transaction (CompleteTx): the outcome is that transaction's commit.
	dInTx
	// dTxEnded: as dInTx, but a lease extension found the row no longer
	// held under the lease — the caller's transaction committed the
	// success (or, rarely, it rolled back and the lease lapsed). The handler
	// may work on; nothing is extended any more, and nothing is cancelled.
	dTxEnded
	// dReturned: its handler returned; its outcome is being written, kept
	// unwritten (record.go) or written.
	dReturned
	// dReleased: given back without using an attempt (Stop, a pause) before
	// it had an outcome; the release reports it (EventReleased).
	dReleased
	// dLost: its lease was lost before it had an outcome; its result is
	// dropped (EventStale).
	dLost
	// dCancelled: its job was cancelled before it had an outcome; its
	// result is dropped (EventCancelled).
	dCancelled
)

// states is a set of delivery states.
type states uint32

func setOf(ss ...deliveryState) states {
	var set states
	for _, s := range ss {
		set |= 1 << s
	}
	return set
}

// The sets of states the transitions leave from, and those that say what a
// delivery holds.
var (
	beforeOutcome = setOf(dQueued, dRunning)                   // to released or lost
	releasable    = setOf(dQueued, dRunning, dReleased)        // to released (release is idempotent)
	cancellable   = setOf(dQueued, dRunning, dInTx, dTxEnded)  // to cancelled
	handlerRuns   = setOf(dRunning, dInTx, dTxEnded)           // to returned
	inCallersTx   = setOf(dInTx, dTxEnded)                     // success decided by the caller's commit
	leaseHeld     = setOf(dQueued, dRunning, dInTx, dReturned) // extended; a lapse matters to a claim
)

func (s states) has(st deliveryState) bool { return s&(1<<st) != 0 }

// state returns d's state now.
func (d *delivery) state() deliveryState { return deliveryState(d.st.Load()) }

// move changes d's state to to if it is one of from, and returns the state
// it left and whether it moved.
func (d *delivery) move(from states, to deliveryState) (deliveryState, bool) {
	for {
		cur := d.state()
		if !from.has(cur) {
			return cur, false
		}
		if d.st.CompareAndSwap(int32(cur), int32(to)) {
			return cur, true
		}
	}
}

// The transitions: every change of a delivery's state is one of these, and
// nothing else calls move.

// start moves a queued delivery to running; false if Stop, a pause, an
// extension or Cancel took it first.
func (d *delivery) start() bool {
	_, ok := d.move(setOf(dQueued), dRunning)
	return ok
}

// decideUnstarted moves a queued delivery whose outcome is decided without
// running its handler (a payload that does not decode, attempts used up)
// to returned; false if Stop, a pause, an extension or Cancel took it first.
func (d *delivery) decideUnstarted() bool {
	_, ok := d.move(setOf(dQueued), dReturned)
	return ok
}

// completeInTx moves a running delivery whose handler put its success into
// the caller's transaction (CompleteTx) to inTx.
func (d *delivery) completeInTx() { d.move(setOf(dRunning), dInTx) }

// returned moves d, whose handler returned, to returned and reports the
// state it left; ok false when the result was dropped before (released,
// lost or cancelled: the state it holds).
func (d *delivery) returned() (from deliveryState, ok bool) {
	return d.move(handlerRuns, dReturned)
}

// releaseUnstarted moves a queued delivery to released (a pause before its
// handler started); false if it left queued already.
func (d *delivery) releaseUnstarted() bool {
	_, ok := d.move(setOf(dQueued), dReleased)
	return ok
}

// releaseBeforeOutcome moves a delivery without an outcome yet (queued or
// running) to released (Stop); false if it has left those states.
func (d *delivery) releaseBeforeOutcome() bool {
	_, ok := d.move(beforeOutcome, dReleased)
	return ok
}

// releaseAgain confirms a delivery is released, moving it there from queued
// or running (release is idempotent); false if it was decided otherwise.
func (d *delivery) releaseAgain() bool {
	_, ok := d.move(releasable, dReleased)
	return ok
}

// markCancelled moves a delivery whose job was cancelled to cancelled, unless its
// handler returned already; false then.
func (d *delivery) markCancelled() bool {
	_, ok := d.move(cancellable, dCancelled)
	return ok
}

// markLost moves a delivery without an outcome yet to lost (an extension found
// its lease lost); false if it has left those states.
func (d *delivery) markLost() bool {
	_, ok := d.move(beforeOutcome, dLost)
	return ok
}

// txEnded moves a delivery in the caller's transaction to txEnded (an
// extension found its row no longer held: the transaction committed).
func (d *delivery) txEnded() { d.move(setOf(dInTx), dTxEnded) }

// inCallersTx reports whether d's success is the caller's transaction's.
func (d *delivery) inCallersTx() bool { return inCallersTx.has(d.state()) }

// holdsLease reports whether this process still holds d's row under its
// lease (or means to, until its outcome is written): its lease is extended
// and its lapse matters to a claim.
func (d *delivery) holdsLease() bool { return leaseHeld.has(d.state()) }
