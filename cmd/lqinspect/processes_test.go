package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// processFile makes a queue file with two registered processes: "gone",
// started at t0, whose one heartbeat at t0+10s recorded the job it held
// (id returned) and which beats no more; and "live", started at t0+4m50s.
// At t0+5m the first is dead and the second alive.
func processFile(t *testing.T) (path string, gone, live int64, held int64) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "queue.db")
	ctx := context.Background()
	start := func(at time.Time, block chan struct{}, running chan int64) (*litequeue.Queue, *clock.Mock) {
		mock := clock.NewMock()
		mock.Set(at)
		q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1,
			Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue}}})
		require.NoError(t, err)
		litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendEmail]) error {
			running <- d.ID
			<-block
			return nil
		})
		require.NoError(t, q.Start(ctx))
		t.Cleanup(func() {
			close(block)
			require.NoError(t, q.Close())
		})
		return q, mock
	}
	running := make(chan int64, 1)
	qg, mg := start(t0, make(chan struct{}), running)
	id, err := qg.Enqueue(ctx, SendEmail{To: "held@example.com"}, nil)
	require.NoError(t, err)
	require.Equal(t, id, <-running)
	mg.Add(litequeue.DefaultHeartbeatInterval)
	deadline := time.Now().Add(15 * time.Second)
	for {
		ps, err := qg.Processes(ctx)
		require.NoError(t, err)
		if len(ps) == 1 && ps[0].Running == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the heartbeat with the held job was not written")
		time.Sleep(time.Millisecond) // a bounded poll of the database for the heartbeat's write
	}
	ql, _ := start(t0.Add(4*time.Minute+50*time.Second), make(chan struct{}), make(chan int64, 1))
	return path, qg.ProcessID(), ql.ProcessID(), id
}

func TestProcessesShowsAliveAndDeadWithTheirJobs(t *testing.T) {
	path, gone, live, held := processFile(t)
	r := lq(t, "", "processes", path, "--now", t0.Add(5*time.Minute).Format(time.RFC3339))
	require.Zero(t, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	require.Equal(t, []string{"ID", "HOST", "PID", "STATUS", "STARTED", "HEARTBEAT", "RUNNING", "JOBS", "QUEUES", "(KINDS)", "VERSION"},
		strings.Fields(lines[0]))
	host, _ := os.Hostname()
	pid := strconv.Itoa(os.Getpid())
	g := strings.Fields(lines[1])
	require.Equal(t, []string{strconv.FormatInt(gone, 10), host, pid, "dead", "5m", "ago", "4m50s", "ago", "1", strconv.FormatInt(held, 10),
		"default", "(send_email)", "-"}, g, "oldest start first: the process that stopped beating is dead, with its job")
	l := strings.Fields(lines[2])
	require.Equal(t, []string{strconv.FormatInt(live, 10), host, pid, "alive", "10s", "ago", "10s", "ago", "0", "-"}, l[:10])

	var ps []litequeue.ProcessInfo
	decode(t, &ps, "processes", path, "--json", "--now", t0.Add(5*time.Minute).Format(time.RFC3339))
	require.Len(t, ps, 2)
	require.Equal(t, gone, ps[0].ID)
	require.False(t, ps[0].Alive)
	require.Equal(t, []int64{held}, ps[0].Jobs)
	require.Equal(t, litequeue.DefaultHeartbeatInterval, ps[0].HeartbeatInterval)
	require.Equal(t, []litequeue.ProcessQueue{{Name: litequeue.DefaultQueue, Kinds: []string{"send_email"}}}, ps[0].Queues)
	require.True(t, ps[1].Alive)

	// Within 3 heartbeat intervals of its last heartbeat, it was alive.
	r = lq(t, "", "processes", path, "--now", t0.Add(40*time.Second).Format(time.RFC3339))
	require.Zero(t, r.code, r.stderr)
	require.NotContains(t, r.stdout, "dead")
}

func TestProcessesWithNoneSaysSo(t *testing.T) {
	path := tagFile(t) // a file no queue was started on
	r := lq(t, "", "processes", path)
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "no processes")
	var ps []litequeue.ProcessInfo
	decode(t, &ps, "processes", path, "--json")
	require.Empty(t, ps)
	r = lq(t, "", "processes")
	require.Equal(t, exitUsage, r.code)
}
