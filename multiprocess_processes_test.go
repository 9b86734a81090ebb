package litequeue

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
)

// TestKilledProcessShowsDeadWithTheJobItHeld runs a queue in another
// process, lets it take a job and beat, SIGKILLs it, and checks what an
// operator then sees: the process dead once its heartbeats lapse (read
// with a clock moved past them), the job it held, and the job naming it.
func TestKilledProcessShowsDeadWithTheJobItHeld(t *testing.T) {
	cfg := controlConfig(t)
	cfg.Heartbeat = 20 * time.Millisecond // the helper's real clock: frequent beats keep the test short
	seedQueue(t, cfg.Path, nil)
	helper := startProc(t, "control", cfg)
	helper.waitReady()

	mock := clock.NewMock()
	q, err := Open(cfg.Path, &Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	id, err := q.Enqueue(ctx, CtlJob{Block: true}, nil)
	require.NoError(t, err)
	waitRecord(t, cfg.Log, "S", id)

	// Read at the real time: the helper beats every 20ms.
	var p ProcessInfo
	require.NoError(t, poll(*procWait, 5*time.Millisecond, func() (bool, error) {
		mock.Set(time.Now())
		ps, err := q.Processes(ctx)
		if err != nil || len(ps) != 1 {
			return false, err
		}
		p = ps[0]
		return p.Running == 1, nil
	}), "the helper's heartbeat with the job it holds")
	require.Equal(t, helper.pid(), p.PID)
	host, _ := os.Hostname()
	require.Equal(t, host, p.Host)
	require.True(t, p.Alive)
	require.Equal(t, []int64{id}, p.Jobs)
	require.Equal(t, []ProcessQueue{{Name: "proc", Kinds: []string{CtlJob{}.Kind()}}}, p.Queues)

	require.True(t, helper.kill(), "the helper was running")
	ps, err := q.Processes(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1, "a killed process leaves its row")
	last := ps[0].HeartbeatAt

	mock.Set(last.Add(DeadAfterBeats * cfg.Heartbeat))
	ps, err = q.Processes(ctx)
	require.NoError(t, err)
	require.True(t, ps[0].Alive, "within %d heartbeats", DeadAfterBeats)
	mock.Set(last.Add(DeadAfterBeats*cfg.Heartbeat + time.Nanosecond))
	ps, err = q.Processes(ctx)
	require.NoError(t, err)
	require.False(t, ps[0].Alive, "dead once its heartbeats lapsed")
	require.Equal(t, []int64{id}, ps[0].Jobs, "with the job it held")
	j, err := q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StateRunning, j.State, "its lease has not expired yet")
	require.Equal(t, p.ID, j.Process, "the job names the dead process")
}
