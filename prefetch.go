package litequeue

import "time"

// prefetchHorizon is the least amount of work, in time, one prefetch
// allowance is: about what a pool's handlers start in this long, measured
// through the Clock. A pool holds up to two allowances claimed beyond its
// handler slots and claims the next when one is left (dispatch.go), so that
// a claim overlaps the handlers' work. The horizon is this or, when the
// pool's claims take longer, prefetchClaims of their time (at most
// prefetchMaxHorizon): a claim then still returns before the allowance left
// runs out. A pool whose handlers are fast claims in large batches (one
// statement, and on PostgreSQL one round trip and one commit, for many
// jobs), yet holds at most two horizons of its own work: a second process
// on the same queue gets all but that of the backlog's share its handlers
// can run. A pool whose handlers are slow holds little or nothing ahead of
// them, so that jobs are not kept leased in one process while another
// process has free workers, and a crash of the process costs few jobs that
// had not started (their attempt was counted at claim).
const prefetchHorizon = 10 * time.Millisecond

// prefetchMaxHorizon bounds the horizon a slow claim stretches it to.
const prefetchMaxHorizon = 50 * time.Millisecond

// prefetchClaims is how many of the pool's recent claim times the horizon
// covers at least.
const prefetchClaims = 2

// prefetchOneAhead is the horizon within which one job start keeps one job
// held ahead: a pool whose handlers start a job at least this often holds
// one claimed beyond them even when the rate times the horizon rounds down
// to none, so a handler that finishes does not wait for a claim's round
// trip before its next job. Measured with one worker on PostgreSQL, 30ms
// jobs took 3.1ms each above the handler's time with nothing held ahead,
// 1.2ms with one; 100ms jobs, which this does not cover, wait a claim each.
const prefetchOneAhead = 50 * time.Millisecond

// prefetchSample is the least Clock time one measurement of the start
// rate spans.
const prefetchSample = 10 * time.Millisecond

// prefetch is a pool's allowance of claimed jobs beyond its handler slots
// (it holds up to twice that): the jobs its handlers started per second,
// measured over the last sample, times the horizon (prefetchHorizon or
// prefetchClaims of the last claim's time, at most prefetchMaxHorizon), at
// least one while they start one per prefetchOneAhead, at most limit
// (Options.ClaimBatch). It starts at half the handler slots, rounded up and
// at most ClaimBatch — so that a pool's first claim, made before any rate
// is known, takes about twice its slots — and follows the measured rate
// from the first full sample on. A Clock that does not move (a mock clock
// a test does not advance) leaves it where it is. Guarded by the pool's mu.
type prefetch struct {
	limit  int
	n      int           // the allowance now, 0..limit
	since  time.Time     // when the current sample began
	starts int           // handler starts in the current sample
	claim  time.Duration // how long the last claim took
}

func newPrefetch(concurrency, limit int) prefetch {
	return prefetch{limit: limit, n: min((concurrency+1)/2, limit)}
}

// claimed records that a claim took d of the Clock.
func (f *prefetch) claimed(d time.Duration) {
	f.claim = max(d, 0)
}

// horizon is the work, in time, one allowance is now.
func (f *prefetch) horizon() time.Duration {
	return min(max(prefetchHorizon, prefetchClaims*f.claim), prefetchMaxHorizon)
}

// started counts a handler start at now and, once the sample spans
// prefetchSample, sets the allowance from it and begins the next. It
// returns the allowance.
func (f *prefetch) started(now time.Time) int {
	if f.since.IsZero() { // the first start begins the first sample
		f.since = now
	}
	f.starts++
	el := now.Sub(f.since)
	if el < prefetchSample {
		return f.n
	}
	n := int64(f.starts) * int64(f.horizon()) / int64(el)
	if n == 0 && int64(f.starts)*int64(prefetchOneAhead) >= int64(el) {
		n = 1
	}
	f.n = int(min(n, int64(f.limit)))
	f.since, f.starts = now, 0
	return f.n
}
