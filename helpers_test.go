package litequeue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
)

// waitLimit bounds every wait for the queue's goroutines in tests. Nothing
// waits out a retry schedule in real time: schedules run on the mock clock.
const waitLimit = 10 * time.Second

// events collects a queue's events for assertions.
type events struct {
	mu  sync.Mutex
	all []Event
	ch  chan struct{}
	// sync, when set, waits until the queue handed every event emitted so
	// far to OnEvent (which runs on its own goroutine): count calls it, so
	// that a count after an action sees the action's events.
	sync func()
}

func newEvents() *events { return &events{ch: make(chan struct{}, 1)} }

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
	default:
	}
}

func (e *events) snapshot() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.all...)
}

func (e *events) count(typ EventType, id int64) int {
	if e.sync != nil {
		e.sync()
	}
	n := 0
	for _, ev := range e.snapshot() {
		if ev.Type == typ && (id == 0 || ev.JobID == id) {
			n++
		}
	}
	return n
}

// wait blocks until at least n events of typ for job id (0: any job) have
// been seen, and returns the last of them.
func (e *events) wait(t testing.TB, typ EventType, id int64, n int) Event {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		var last Event
		c := 0
		for _, ev := range e.snapshot() {
			if ev.Type == typ && (id == 0 || ev.JobID == id) {
				c++
				last = ev
			}
		}
		if c >= n {
			return last
		}
		select {
		case <-e.ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %d %q events of job %d; saw %+v", n, typ, id, e.snapshot())
		}
	}
}

// waitFor polls cond (a read nothing notifies the test of, such as a read of
// the database) every millisecond until it holds, and fails the test naming
// what it waited for if cond still does not hold after waitLimit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, waitLimit, time.Millisecond, what, cond)
}

// waitWithin polls cond every interval until it holds, and fails the test
// naming what it waited for if cond still does not hold after limit.
func waitWithin(t testing.TB, limit, every time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := poll(limit, every, func() (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%v waiting until %s", err, what)
	}
}

// errPollTimeout is poll's error when its condition did not hold in time.
var errPollTimeout = errors.New("timed out")

// poll calls cond every interval until it returns true or an error, and
// returns that error, or one wrapping errPollTimeout if cond did not hold
// within limit. It is the real-time wait of code without a testing.T (the
// helper processes) and of the waits for other processes.
func poll(limit, every time.Duration, cond func() (bool, error)) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("%w after %s", errPollTimeout, limit)
		}
	}
}

// wake lets a test's goroutines tell a waiting test that what it waits for
// may have changed, so that the wait checks again at once instead of
// polling.
type wake chan struct{}

func newWake() wake { return make(wake, 1) }

// notify wakes the goroutine in until, if any; it never blocks, and
// notifications that arrive before until looks are merged into one.
func (w wake) notify() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// until blocks until cond holds, checking it again each time w is
// notified, and fails the test naming what it waited for if cond does not
// hold within waitLimit.
func (w wake) until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-w:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting until %s", waitLimit, what)
		}
	}
}

// underRace returns race under the race detector and full otherwise: the
// counts of kills and jobs of the longest multi-process tests, which the
// detector would slow to minutes. The full counts run without -race.
func underRace(full, race int) int {
	if raceEnabled {
		return race
	}
	return full
}

// testClock is a mock clock that also records the timers the queue arms
// through it. A dispatcher computes its wait from Now and arms the timer a
// moment later; a test that moves the clock in between gets a timer armed
// too late, which never fires. Tests therefore wait with waitTimer until the
// timer for the due time they expect is armed, then move the clock.
//
// Add also closes a gap in the mock itself: clock.Mock.Add runs each timer's
// function on a goroutine of its own and may return before a function it
// woke has armed the next timer — a timer due by the new now that no later
// Add would fire until the clock moves again. Add here runs such timers.
type testClock struct {
	*clock.Mock
	mu     sync.Mutex
	armed  []time.Time
	ch     chan struct{}
	adding bool      // an Add is moving the clock to target
	target time.Time // where it goes
	late   bool      // a timer due by target was armed while it moved
}

// Add moves the clock by d, as clock.Mock.Add, then runs the timers due by
// the new now that functions woken on the way armed too late for the
// mock's own loop.
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.adding, c.target = true, c.Mock.Now().Add(d)
	c.mu.Unlock()
	c.Mock.Add(d)
	for {
		c.mu.Lock()
		late := c.late
		c.late = false
		if !late {
			c.adding = false
		}
		c.mu.Unlock()
		if !late {
			return
		}
		c.Mock.Add(0)
	}
}

func newTestClock() *testClock { return &testClock{Mock: clock.NewMock(), ch: make(chan struct{}, 1)} }

// Timer arms a timer on the mock clock and records when it is due.
func (c *testClock) Timer(d time.Duration) *clock.Timer {
	at := c.Mock.Now().Add(d)
	tm := c.Mock.Timer(d)
	c.record(at)
	return tm
}

// AfterFunc arms a function timer on the mock clock and records when it is
// due (the queue's alarms use it).
func (c *testClock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	at := c.Mock.Now().Add(d)
	tm := c.Mock.AfterFunc(d, f)
	c.record(at)
	return tm
}

func (c *testClock) record(at time.Time) {
	c.mu.Lock()
	c.armed = append(c.armed, at)
	late := c.adding && !at.After(c.target)
	if late {
		c.late = true
	}
	adding := c.adding
	c.mu.Unlock()
	if !adding && !at.After(c.Mock.Now()) {
		// Armed for a time the clock has reached, after the Add that
		// reached it: only another Add fires it.
		go c.Mock.Add(0)
	}
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// waitTimer blocks until some timer due at or before the latest of ats has
// been armed, and returns the earliest of ats. The queue sets its alarms
// before it reports the events tests wait for (a retry's due time, an
// enqueue's delay, the extension of a claimed job's lease), and an alarm
// that fires early re-arms for what is still ahead, so once a timer is armed
// moving the clock to the time the test expects runs what is due then.
func (c *testClock) waitTimer(t testing.TB, ats ...time.Time) time.Time {
	t.Helper()
	earliest, latest := ats[0], ats[0]
	for _, at := range ats {
		if at.Before(earliest) {
			earliest = at
		}
		if at.After(latest) {
			latest = at
		}
	}
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		armed := slices.ContainsFunc(c.armed, func(a time.Time) bool { return !a.After(latest) })
		c.mu.Unlock()
		if armed {
			return earliest
		}
		select {
		case <-c.ch:
		case <-deadline.C:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("timed out waiting for a timer due by %v; armed: %v", latest, c.armed)
		}
	}
}

// stepTo moves the clock to target once a timer due by then is armed: the
// alarms the queue sets on the way (such as the end of a lease it saw still
// running) fire as the clock passes them and re-arm for what is still due.
func (c *testClock) stepTo(t testing.TB, target time.Time, via ...time.Time) {
	t.Helper()
	c.waitTimer(t, append([]time.Time{target}, via...)...)
	c.Mock.Add(target.Sub(c.Mock.Now()))
}

type harness struct {
	q     *Queue
	clock *testClock
	tc    *testClock // clock, recording the timers armed (nil if not set up by setup)
	ev    *events
	path  string
	opts  Options
}

// setup opens a queue on a new file in t.TempDir() with a mock clock, a
// seeded random source and an event collector. mod adjusts the options.
func setup(t *testing.T, mod func(o *Options)) *harness {
	t.Helper()
	tc := newTestClock()
	h := &harness{clock: tc, tc: tc, ev: newEvents(), path: filepath.Join(t.TempDir(), "q.db")}
	h.clock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h.opts = Options{Clock: tc, Rand: rand.New(rand.NewPCG(1, 2)), OnEvent: h.ev.add, PollInterval: -1}
	if mod != nil {
		mod(&h.opts)
	}
	q, err := Open(h.path, &h.opts)
	require.NoError(t, err)
	h.q = q
	h.ev.sync = func() { _ = h.q.FlushEvents(context.Background()) }
	t.Cleanup(func() {
		require.NoError(t, q.Close())
		checkInvariants(t, h.path)
	})
	return h
}

// reopen closes the queue and opens the same file again with the same
// options (a restart).
func (h *harness) reopen(t *testing.T) {
	t.Helper()
	require.NoError(t, h.q.Close())
	q, err := Open(h.path, &h.opts)
	require.NoError(t, err)
	h.q = q
}

func (h *harness) start(t *testing.T) {
	t.Helper()
	require.NoError(t, h.q.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = h.q.Stop(ctx)
	})
}

// checkInvariants opens the file read-only and checks what must hold in any
// queue file: integrity, no live row with an idempotency key twice, no lease
// on a row that is not running.
func checkInvariants(t *testing.T, path string) {
	t.Helper()
	q, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer q.Close()
	var res string
	require.NoError(t, q.lite.DB().QueryRow("PRAGMA integrity_check").Scan(&res))
	require.Equal(t, "ok", res)
	var bad int
	require.NoError(t, q.lite.DB().QueryRow(`SELECT count(*) FROM lq_jobs WHERE (state = 1) != (lease IS NOT NULL)`).Scan(&bad))
	require.Zero(t, bad, "rows with a lease that are not running, or running without one")
}

// Test job types.

type SendEmail struct {
	To string `json:"to"`
}

func (SendEmail) Kind() string { return "send_email" }

type Resize struct {
	N int `json:"n"`
}

func (Resize) Kind() string      { return "resize" }
func (Resize) QueueName() string { return "media" }

type OwnPolicy struct {
	Attempts int `json:"attempts"`
}

func (OwnPolicy) Kind() string { return "own_policy" }
func (j OwnPolicy) RetryPolicy() *RetryPolicy {
	if j.Attempts == 0 {
		return nil
	}
	p := FixedRetry(j.Attempts, time.Second)
	return &p
}

// testPool returns a pool of cfg's queue for kinds that holds up to capacity
// claimed jobs, with no dispatcher, workers or lease extension: tests claim
// and execute by hand.
func testPool(q *Queue, cfg QueueConfig, capacity int, kinds ...string) *pool {
	r := newRunState(q, context.Background())
	p := newPool(q, r, cfg, kinds)
	p.capacity = capacity
	p.tokens = make(chan struct{}, capacity)
	r.pools[cfg.Name] = p
	return p
}
