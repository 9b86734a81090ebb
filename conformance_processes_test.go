package litequeue_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// The processes registry: each started queue registers itself, beats, is
// shown dead when its heartbeats stop, ages out, and is named by the jobs
// it claims and the attempts it runs.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"ProcessesOfTwoQueuesSeeEachOtherAndStopRemovesOne", testProcessesSeeEachOther},
		{"ProcessWhoseHeartbeatLapsesIsDeadWithItsJobsThenAgesOut", testProcessDead},
		{"AttemptsAndRunningJobsNameTheirProcess", testProcessOfAttempts},
		{"AttemptsAndRunningJobsNameTheirProcessUnderGroupLimits", testProcessOfLimitedAttempts},
	}...)
}

// ProcMedia is a job of queue "media".
type ProcMedia struct{}

func (ProcMedia) Kind() string      { return "conformance_media" }
func (ProcMedia) QueueName() string { return "media" }

var mediaQueue = litequeue.QueueConfig{Name: "media", Retry: litequeue.NoRetry()}

// processByID finds process id in ps.
func processByID(ps []litequeue.ProcessInfo, id int64) (litequeue.ProcessInfo, bool) {
	for _, p := range ps {
		if p.ID == id {
			return p, true
		}
	}
	return litequeue.ProcessInfo{}, false
}

func processes(t *testing.T, q *litequeue.Queue) []litequeue.ProcessInfo {
	t.Helper()
	ps, err := q.Processes(context.Background())
	require.NoError(t, err)
	return ps
}

func testProcessesSeeEachOther(t *testing.T, b conformanceBackend) {
	addr := b.Fresh(t)
	a := open(t, b, addr, Start, queues(queue(litequeue.NoRetry())))
	c := open(t, b, addr, Start, queues(mediaQueue))
	litequeue.Register(a.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	litequeue.Register(c.Q, func(ctx context.Context, d *litequeue.Delivery[ProcMedia]) error { return nil })
	require.Empty(t, processes(t, a.Q), "no queue started yet")
	require.Zero(t, a.Q.ProcessID())
	a.start(t)
	c.start(t)
	idA, idC := a.Q.ProcessID(), c.Q.ProcessID()
	require.NotZero(t, idA)
	require.NotEqual(t, idA, idC)
	host, _ := os.Hostname()
	for _, h := range []*Harness{a, c} {
		ps := processes(t, h.Q)
		require.Len(t, ps, 2)
		pa, ok := processByID(ps, idA)
		require.True(t, ok)
		require.Equal(t, host, pa.Host)
		require.Equal(t, os.Getpid(), pa.PID)
		require.True(t, pa.Alive)
		require.Equal(t, Start, pa.StartedAt.UTC())
		require.Equal(t, litequeue.DefaultHeartbeatInterval, pa.HeartbeatInterval)
		require.Equal(t, []litequeue.ProcessQueue{{Name: litequeue.DefaultQueue, Kinds: []string{Email{}.Kind()}}}, pa.Queues)
		pc, ok := processByID(ps, idC)
		require.True(t, ok)
		require.Equal(t, []litequeue.ProcessQueue{{Name: "media", Kinds: []string{ProcMedia{}.Kind()}}}, pc.Queues)
	}
	require.NoError(t, c.Q.Stop(context.Background()))
	ps := processes(t, a.Q)
	require.Len(t, ps, 1, "a clean Stop removes the process")
	require.Equal(t, idA, ps[0].ID)
	require.Zero(t, c.Q.ProcessID())
}

func testProcessDead(t *testing.T, b conformanceBackend) {
	addr := b.Fresh(t)
	const every, retention = time.Minute, 30 * time.Minute
	mod := func(o *litequeue.Options) {
		o.Queues = []litequeue.QueueConfig{queue(litequeue.NoRetry())}
		o.HeartbeatInterval, o.ProcessRetention = every, retention
	}
	gone := open(t, b, addr, Start, mod)
	watcher := open(t, b, addr, Start, func(o *litequeue.Options) {
		mod(o)
		o.Queues = []litequeue.QueueConfig{mediaQueue}
	})
	held := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	litequeue.Register(gone.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		close(held)
		<-release
		return nil
	})
	litequeue.Register(watcher.Q, func(ctx context.Context, d *litequeue.Delivery[ProcMedia]) error { return nil })
	gone.start(t)
	watcher.start(t)
	id, err := gone.Q.Enqueue(context.Background(), Email{To: "held"}, nil)
	require.NoError(t, err)
	<-held
	goneID := gone.Q.ProcessID()
	// One heartbeat of the process that will die, with the job it holds.
	gone.Clock.Add(every)
	waitFor(t, "the heartbeat records the held job", func() bool {
		p, ok := processByID(processes(t, watcher.Q), goneID)
		return ok && p.Running == 1
	})
	p, _ := processByID(processes(t, watcher.Q), goneID)
	require.Equal(t, []int64{id}, p.Jobs)
	require.True(t, p.Alive)
	info, err := watcher.Q.Job(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, goneID, info.Process, "the running job names the process that holds it")

	// From here on that process beats no more (its clock stands still), as
	// after a kill -9. Alive or dead is judged by the reader's clock.
	watcher.Clock.Set(Start.Add(every + litequeue.DeadAfterBeats*every))
	p, _ = processByID(processes(t, watcher.Q), goneID)
	require.True(t, p.Alive, "%d intervals after its last heartbeat", litequeue.DeadAfterBeats)
	watcher.Clock.Set(Start.Add(every + litequeue.DeadAfterBeats*every + time.Nanosecond))
	p, ok := processByID(processes(t, watcher.Q), goneID)
	require.True(t, ok)
	require.False(t, p.Alive, "more than %d intervals after its last heartbeat", litequeue.DeadAfterBeats)
	require.Equal(t, []int64{id}, p.Jobs, "a dead process shows the jobs it held")

	// The live process's heartbeats delete it once the retention passed:
	// not before (no heartbeat up to then can), and at the first heartbeat
	// after. (Each heartbeat sets the next one's alarm after its write, so
	// the test moves the clock on until one comes.)
	watcher.Clock.Set(Start.Add(every + retention))
	_, ok = processByID(processes(t, watcher.Q), goneID)
	require.True(t, ok, "kept for the retention")
	waitFor(t, "the dead process ages out", func() bool {
		if _, ok := processByID(processes(t, watcher.Q), goneID); !ok {
			return true
		}
		watcher.Clock.Add(every)
		return false
	})
	// The loop may have moved the clock on faster than the watcher's own
	// heartbeats ran (a loaded machine), and a heartbeat's alarm set from
	// a time read while the clock moved may lie ahead of it: move the
	// clock on an interval at a time, a bounded real-time pause apart,
	// until a beat stamps the clock's time and the watcher is alive.
	var self litequeue.ProcessInfo
	moved := time.Now()
	waitFor(t, "the watcher's own heartbeat catches up with its clock", func() bool {
		self, _ = processByID(processes(t, watcher.Q), watcher.Q.ProcessID())
		if !self.Alive && time.Since(moved) > 100*time.Millisecond {
			watcher.Clock.Add(every)
			moved = time.Now()
		}
		return self.Alive
	})
	require.Greater(t, self.HeartbeatAt.Sub(Start.Add(every)), retention, "deleted by a heartbeat after the retention")
	require.Len(t, processes(t, watcher.Q), 1)
}

func testProcessOfAttempts(t *testing.T, b conformanceBackend) {
	processOfAttempts(t, b, litequeue.QueueLimits{}, nil)
}

// A claim through a queue's per-group limits names its process on the row
// as the plain claim does.
func testProcessOfLimitedAttempts(t *testing.T, b conformanceBackend) {
	processOfAttempts(t, b, litequeue.QueueLimits{KeyConcurrency: 1}, &litequeue.EnqueueOptions{Group: "g"})
}

func processOfAttempts(t *testing.T, b conformanceBackend, limits litequeue.QueueLimits, opts *litequeue.EnqueueOptions) {
	cfg := queue(litequeue.FixedRetry(2, time.Second))
	cfg.Limits = limits
	h := setup(t, b, queues(cfg))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return errors.New("refused")
	})
	// Enqueued before Start: the dispatcher's claim takes it (a job
	// enqueued to a started queue is claimed with its insert, as in
	// testProcessDead).
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, opts)
	require.NoError(t, err)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventRetrying, id, 1)
	h.Clock.Add(2 * time.Second)
	h.Ev.Wait(t, litequeue.EventDead, id, 1)
	info, err := h.Q.Job(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, info.Attempts, 2)
	host, _ := os.Hostname()
	for _, a := range info.Attempts {
		require.Equal(t, h.Q.ProcessID(), a.Process)
		require.Equal(t, host, a.Host)
		require.Equal(t, os.Getpid(), a.PID)
	}
	require.Equal(t, h.Q.ProcessID(), info.Process)
}
