package litequeue

import "time"

// prefetchHorizon is how much work, in time, one prefetch allowance is:
// about what a pool's handlers start in this long, measured through the
// Clock. A pool holds up to two allowances claimed beyond its handler
// slots and claims the next when one is left (dispatch.go), so that a
// claim overlaps the handlers' work. A pool whose handlers are fast claims
// in large batches (one statement, and on PostgreSQL one round trip and
// one commit, for many jobs); a pool whose handlers are slow holds little
// or nothing ahead of them, so that jobs are not kept leased in one
// process while another process has free workers, and a crash of the
// process costs few jobs that had not started (their attempt was counted
// at claim). A job not held ahead waits for a claim when a handler frees:
// one round trip on PostgreSQL. Measured with one worker on PostgreSQL,
// 30ms jobs took 3.1ms each above the handler's time with a horizon of
// 20ms, 1.2ms with 50ms (as with a fixed prefetch); 100ms jobs, which 50ms
// does not cover, about 3.5ms more than with a fixed prefetch.
const prefetchHorizon = 50 * time.Millisecond

// prefetchSample is the least Clock time one measurement of the start
// rate spans.
const prefetchSample = 10 * time.Millisecond

// prefetch is a pool's allowance of claimed jobs beyond its handler slots
// (it holds up to twice that): the jobs its handlers started per second,
// measured over the last sample, times prefetchHorizon, at most limit
// (Options.ClaimBatch). It starts at half the handler slots, rounded up and
// at most ClaimBatch — so that a pool's first claim, made before any rate
// is known, takes about twice its slots — and follows the measured rate
// from the first full sample on. A Clock that does not move (a mock clock a test does not
// advance) leaves it where it is. Guarded by the pool's mu.
type prefetch struct {
	limit  int
	n      int       // the allowance now, 0..limit
	since  time.Time // when the current sample began
	starts int       // handler starts in the current sample
}

func newPrefetch(concurrency, limit int) prefetch {
	return prefetch{limit: limit, n: min((concurrency+1)/2, limit)}
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
	f.n = int(min(int64(f.starts)*int64(prefetchHorizon)/int64(el), int64(f.limit)))
	f.since, f.starts = now, 0
	return f.n
}
