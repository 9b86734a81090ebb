package litequeue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// Clock is the time source of a Queue. Every time the queue reads — enqueue
// and due times, leases, retry delays, job timeouts, retention — comes from
// it, including the "now" written into SQL.
//
// Production code leaves Options.Clock nil and gets the real clock. Tests pass
// clock.NewMock() and advance it, so a retry schedule of hours runs in
// milliseconds and exactly: the queue sets a Clock timer only for a moment
// something is due (the next job, the next lease extension while a handler
// runs, the next expiry of a retained job), never a periodic ticker, so
// advancing a mock clock costs a few timer firings, not one per tick.
//
// The one wait that is not on the Clock is the watch for other processes'
// writes (Options.PollInterval), which happen in real time: it decides no
// schedule.
type Clock = clock.Clock

// unixNanos converts t to the integer unit stored in the database: nanoseconds
// since the Unix epoch.
func unixNanos(c Clock) int64 { return c.Now().UnixNano() }

// maxStoredTime is the latest time an int64 of Unix nanoseconds holds (year
// 2262).
var maxStoredTime = time.Unix(0, 1<<63-1)

// addClamped returns t+d in Unix nanoseconds, saturated at the latest time the
// store can hold instead of wrapping into the past. d below zero counts as 0.
func addClamped(t time.Time, d time.Duration) int64 {
	if d <= 0 {
		return t.UnixNano()
	}
	if d >= maxStoredTime.Sub(t) {
		return maxStoredTime.UnixNano()
	}
	return t.Add(d).UnixNano()
}

// withClockTimeout is context.WithTimeout on c: the returned context is
// cancelled with cause when c reaches now+d, and then its Err is
// context.DeadlineExceeded. Unlike the mock clock's own WithTimeout its state
// is safe to read from any goroutine.
func withClockTimeout(c Clock, parent context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	inner, cancel := context.WithCancelCause(parent)
	ctx := &clockDeadline{Context: inner, deadline: c.Now().Add(d)}
	t := c.AfterFunc(d, func() {
		ctx.expired.Store(true)
		cancel(cause)
	})
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// clockDeadline is a cancelable context with a deadline on a Clock.
type clockDeadline struct {
	context.Context
	deadline time.Time
	expired  atomic.Bool
}

func (c *clockDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *clockDeadline) Err() error {
	err := c.Context.Err()
	if err != nil && c.expired.Load() {
		return context.DeadlineExceeded
	}
	return err
}

// alarm is a wake-up at a moment of a Clock that any goroutine can move
// earlier. Setting it is synchronous: once set returns, advancing a mock
// clock past the moment fires it, so a test that waits for an event and then
// advances the clock never races the goroutine that sleeps on the alarm. A
// moment already reached fires at once. C receives one value per firing.
type alarm struct {
	clock Clock
	C     chan struct{}

	mu  sync.Mutex
	t   *clock.Timer
	at  time.Time
	gen uint64 // which setting the running timer belongs to
}

func newAlarm(c Clock) *alarm { return &alarm{clock: c, C: make(chan struct{}, 1)} }

// set replaces the alarm's moment with at; earliest keeps an earlier moment
// already set instead.
func (a *alarm) set(at time.Time, earliest bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if earliest && a.t != nil && !at.Before(a.at) {
		return
	}
	a.stopLocked()
	if d := a.clock.Until(at); d > 0 {
		a.gen++
		gen := a.gen
		a.at = at
		a.t = a.clock.AfterFunc(d, func() { a.fire(gen) })
		return
	}
	a.signal()
}

func (a *alarm) fire(gen uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen != a.gen || a.t == nil {
		return // replaced or stopped after it fired
	}
	a.t = nil
	a.signal()
}

func (a *alarm) signal() {
	select {
	case a.C <- struct{}{}:
	default:
	}
}

// stop clears the alarm.
func (a *alarm) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopLocked()
}

func (a *alarm) stopLocked() {
	if a.t != nil {
		a.t.Stop()
		a.t = nil
	}
}
