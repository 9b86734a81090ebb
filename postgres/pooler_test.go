package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

type pooledJob struct{ N int }

func (pooledJob) Kind() string { return "pooled" }

// TestPgBouncerSettingsOfTheQueue opens queues through PgBouncer with the
// options that change how the queue's connections are set up —
// DurabilityProcess (synchronous_commit off) and ReadOnly — and uses them:
// PgBouncer refuses startup parameters it does not know.
func TestPgBouncerSettingsOfTheQueue(t *testing.T) {
	ctx := context.Background()
	b := pgtest.StartBouncer(t)
	u, _ := b.FreshDatabase(t)

	q, err := postgres.Open(ctx, u, &litequeue.Options{Durability: litequeue.DurabilityProcess})
	require.NoError(t, err)
	id, err := q.Enqueue(ctx, pooledJob{N: 1}, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())

	ro, err := postgres.Open(ctx, u, &litequeue.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	job, err := ro.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, `{"N":1}`, string(job.Payload))
	_, err = ro.Enqueue(ctx, pooledJob{N: 2}, nil)
	require.ErrorIs(t, err, litequeue.ErrReadOnly)
}

// TestPgBouncerStartsAnotherProcesssJobWithoutNotifications: through a
// pooler in transaction mode no notification reaches a listening
// connection, not even the queue's own probe; the queue warns and looks for
// work every PollInterval (default 200ms), so a job enqueued by another
// queue (another process) starts within one. Real time: the bound is
// generous slack.
func TestPgBouncerStartsAnotherProcesssJobWithoutNotifications(t *testing.T) {
	ctx := context.Background()
	b := pgtest.StartBouncer(t)
	u, _ := b.FreshDatabase(t)

	ran, warned := startPooledWorker(t, u, postgres.Options{})
	for deaf := false; !deaf; {
		select {
		case msg := <-warned: // also the warning that the queue has no QueueConfig
			deaf = strings.Contains(msg, "receives no notifications")
		case <-time.After(30 * time.Second):
			t.Fatal("the queue did not warn that its listening connection hears nothing")
		}
	}

	producer, err := postgres.Open(ctx, u, nil)
	require.NoError(t, err)
	defer producer.Close()
	requireEachStarts(t, producer, ran, 2, "the poll is every 200ms")
}

// startPooledWorker opens a queue at u with opts and a logger of its
// warnings, and starts it with a handler of pooledJob that sends each job's
// N on ran. The queue stops and closes when the test ends.
func startPooledWorker(t *testing.T, u string, opts postgres.Options) (ran chan int, warned chan string) {
	t.Helper()
	ctx := context.Background()
	warned = make(chan string, 10)
	opts.Logger = pgtest.Messages{Ch: warned, Level: slog.LevelWarn}.Logger()
	worker, err := postgres.OpenWith(ctx, u, &opts)
	require.NoError(t, err)
	t.Cleanup(func() { worker.Close() })
	ran = make(chan int, 4)
	litequeue.Register(worker, func(ctx context.Context, d *litequeue.Delivery[pooledJob]) error {
		ran <- d.Job.N
		return nil
	})
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(func() { worker.Stop(ctx) })
	return ran, warned
}

// requireEachStarts enqueues pooledJobs 1 to n on producer, one at a time,
// and requires each to start (its N on ran) within ten seconds; why says
// what else would have to start it.
func requireEachStarts(t *testing.T, producer *litequeue.Queue, ran chan int, n int, why string) {
	t.Helper()
	for i := 1; i <= n; i++ {
		start := time.Now()
		_, err := producer.Enqueue(context.Background(), pooledJob{N: i}, nil)
		require.NoError(t, err)
		select {
		case got := <-ran:
			require.Equal(t, i, got)
			t.Logf("job %d of the other queue started after %v", i, time.Since(start).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Fatalf("job %d enqueued by another queue did not start within 10s (%s)", i, why)
		}
	}
}

// TestPgBouncerWithListenURLStartsAnotherProcesssJobAtOnce: a queue whose
// pool goes through PgBouncer in transaction mode, with Options.ListenURL
// reaching the database directly, hears the other queue's enqueues: with
// a PollInterval of a minute (and so a backstop of five), only a
// notification can start each job within the test's ten seconds, and the
// queue does not warn that it hears nothing.
func TestPgBouncerWithListenURLStartsAnotherProcesssJobAtOnce(t *testing.T) {
	ctx := context.Background()
	b := pgtest.StartBouncer(t)
	pooled, direct := b.FreshDatabase(t)

	ran, warned := startPooledWorker(t, pooled, postgres.Options{Options: litequeue.Options{PollInterval: time.Minute}, ListenURL: direct})

	producer, err := postgres.Open(ctx, pooled, nil)
	require.NoError(t, err)
	defer producer.Close()
	requireEachStarts(t, producer, ran, 3, "the ListenURL connection heard no notification, and the poll is every minute")
	// Past the probe's wait (a second): a listener taken for deaf would
	// have warned by then.
	for done := time.After(1500 * time.Millisecond); ; {
		select {
		case msg := <-warned:
			require.NotContains(t, msg, "receives no notifications")
			continue
		case <-done:
		}
		break
	}
}

// TestPgBouncerListenURLThroughThePoolerIsReported: a ListenURL that goes
// through the pooler too reaches the right database, so Open accepts it,
// but its LISTEN hears nothing: the queue says that of the ListenURL.
func TestPgBouncerListenURLThroughThePoolerIsReported(t *testing.T) {
	b := pgtest.StartBouncer(t)
	pooled, _ := b.FreshDatabase(t)
	_, warned := startPooledWorker(t, pooled, postgres.Options{ListenURL: pooled})
	for {
		select {
		case msg := <-warned: // also the warning that the queue has no QueueConfig
			if !strings.Contains(msg, "receives no notifications") {
				continue
			}
			require.Contains(t, msg, "Options.ListenURL")
			return
		case <-time.After(30 * time.Second):
			t.Fatal("the queue did not warn that its ListenURL connection hears nothing")
		}
	}
}
