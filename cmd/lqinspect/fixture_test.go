package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// Job types of the fixture file.

type SendEmail struct {
	To string `json:"to"`
}

func (SendEmail) Kind() string { return "send_email" }

type Resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func (Resize) Kind() string      { return "resize" }
func (Resize) QueueName() string { return "media" }

// Render blocks in its handler, so the fixture has a running job.
type Render struct {
	Page int `json:"page"`
}

func (Render) Kind() string      { return "render" }
func (Render) QueueName() string { return "media" }

// Import fails permanently: a dead letter.
type Import struct {
	File string `json:"file"`
}

func (Import) Kind() string      { return "import" }
func (Import) QueueName() string { return "imports" }
func (Import) RetryPolicy() *litequeue.RetryPolicy {
	p := litequeue.FixedRetry(3, time.Minute)
	return &p
}

// Sync fails and retries: a scheduled job with an attempt history.
type Sync struct {
	Account string `json:"account"`
}

func (Sync) Kind() string      { return "sync" }
func (Sync) QueueName() string { return "imports" }
func (Sync) RetryPolicy() *litequeue.RetryPolicy {
	p := litequeue.FixedRetry(3, 30*time.Second)
	return &p
}

// Ping succeeds: a retained completed job.
type Ping struct{}

func (Ping) Kind() string { return "ping" }

// t0 is when the fixture's first jobs were enqueued.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixtureNow is the "now" the tests show the fixture at: 10s after its
// queue started, at t0+10m.
var fixtureNow = t0.Add(10*time.Minute + 10*time.Second)

// waitLimit bounds every wait for the fixture queue's goroutines.
const waitLimit = 10 * time.Second

// fixture is a queue file in t.TempDir() whose own queue keeps running
// (a job of kind render stays running until the test ends):
//
//	id  queue    kind        state at fixtureNow
//	1   default  send_email  ready (key welcome-42)
//	2   default  send_email  ready (priority -5)
//	3   imports  import      dead (permanent)
//	4   imports  import      dead (permanent)
//	5   imports  import      dead (permanent)
//	6   imports  sync        scheduled (1 failed attempt, retry in 20s)
//	7   media    resize      scheduled (delayed 1h)
//	8   media    resize      ready
//	9   media    render      running (lease ends in 20s)
//	10  default  ping        completed (retained)
type fixture struct {
	path   string
	clock  *clock.Mock
	q      *litequeue.Queue
	events <-chan litequeue.Event // the queue's events after the fixture's own
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	fx := &fixture{path: filepath.Join(t.TempDir(), "queue.db"), clock: clock.NewMock()}
	fx.clock.Set(t0)
	events := make(chan litequeue.Event, 100)
	q, err := litequeue.Open(fx.path, &litequeue.Options{
		Clock:              fx.clock,
		PollInterval:       -1,
		CompletedRetention: 24 * time.Hour,
		OnEvent:            func(e litequeue.Event) { events <- e },
	})
	require.NoError(t, err)
	fx.q, fx.events = q, events
	release := make(chan struct{})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Import]) error {
		return litequeue.Permanent(errors.New("bad csv header: want 3 columns, got 2\nin " + d.Job.File))
	})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Sync]) error {
		return errors.New("dial tcp 10.0.0.7:443: connection refused")
	})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Render]) error {
		<-release
		return nil
	})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Ping]) error {
		if err := d.SetProgress(1, "pong"); err != nil {
			return err
		}
		return d.SetOutput(map[string]int{"latency_ms": 3})
	})
	t.Cleanup(func() {
		close(release)
		stopCtx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		require.NoError(t, q.Stop(stopCtx))
		require.NoError(t, q.Close())
	})

	enqueue := func(j litequeue.Job, o *litequeue.EnqueueOptions) {
		t.Helper()
		_, err := q.Enqueue(ctx, j, o)
		require.NoError(t, err)
	}
	enqueue(SendEmail{To: "ada@example.com"}, &litequeue.EnqueueOptions{Key: "welcome-42"})
	enqueue(SendEmail{To: "grace@example.com"}, &litequeue.EnqueueOptions{Priority: -5})
	fx.clock.Add(time.Minute)
	enqueue(Import{File: "a.csv"}, nil)
	enqueue(Import{File: "b.csv"}, nil)
	enqueue(Import{File: "c.csv"}, nil)
	enqueue(Sync{Account: "acme"}, nil)
	fx.clock.Add(time.Minute)
	enqueue(Resize{Image: "cat.png", Width: 640}, &litequeue.EnqueueOptions{Delay: time.Hour})
	enqueue(Resize{Image: "dog.png", Width: 320}, nil)
	fx.clock.Add(time.Minute)
	enqueue(Render{Page: 1}, nil)
	enqueue(Ping{}, nil)
	fx.clock.Set(t0.Add(10 * time.Minute))

	require.NoError(t, q.Start(ctx))
	want := map[litequeue.EventType]int{litequeue.EventDead: 3, litequeue.EventRetrying: 1, litequeue.EventSucceeded: 1, litequeue.EventStarted: 6}
	deadline := time.After(waitLimit)
	for len(want) > 0 {
		select {
		case e := <-events:
			if want[e.Type]--; want[e.Type] <= 0 {
				delete(want, e.Type)
			}
		case <-deadline:
			t.Fatalf("fixture: still waiting for events %v", want)
		}
	}
	return fx
}

// waitEvent waits for an event of type typ for job id.
func (fx *fixture) waitEvent(t *testing.T, typ litequeue.EventType, id int64) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case e := <-fx.events:
			if e.Type == typ && e.JobID == id {
				return
			}
		case <-deadline:
			t.Fatalf("waiting for %s of job %d", typ, id)
		}
	}
}

// result is one run of lqinspect.
type result struct {
	code           int
	stdout, stderr string
}

// lq runs lqinspect in-process with args, stdin and LQINSPECT_NOW set to
// fixtureNow.
func lq(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	return lqApp(t, nil, stdin, args...)
}

// lqApp is lq with a hook to adjust the app's seams.
func lqApp(t testing.TB, adjust func(a *app), stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{
		ctx:    context.Background(),
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errOut,
		getenv: func(k string) string {
			if k == envNow {
				return fixtureNow.Format(time.RFC3339)
			}
			return ""
		},
		isTerminal: func(io.Reader) bool { return false },
		newTicker:  realTicker,
	}
	if adjust != nil {
		adjust(a)
	}
	code := a.run(args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}
