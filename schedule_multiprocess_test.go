package litequeue

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
)

// The multi-process schedule test re-executes this test binary with
// scheduleHelperEnv set: TestScheduleHelperProcess then runs one process
// that registers the shared schedules, advances its own mock clock from
// one scheduler wake-up to the next until the end time, and exits.

const scheduleHelperEnv = "LITEQUEUE_SCHEDULE_HELPER"

var (
	mpStart = utc(2026, 3, 8, 6, 0) // New York springs forward at 07:00 UTC
	mpEnd   = utc(2026, 3, 8, 9, 0)
)

func mpSchedules() []Schedule {
	return []Schedule{
		{Name: "mp-minute", Cron: "* * * * *", Job: Tick{"minute"}},
		{Name: "mp-5min-ny", Cron: "*/5 * * * *", TimeZone: "America/New_York", Job: Tick{"5min"}},
		{Name: "mp-90s", Every: 90 * time.Second, Job: Tick{"90s"}},
		{Name: "mp-daily-ny", Cron: "30 2 * * *", TimeZone: "America/New_York", Job: Tick{"daily"}},
	}
}

// TestScheduleHelperProcess is not a test: it is the body of a helper
// process of TestThreeProcessesEnqueueEveryOccurrenceExactlyOnce.
func TestScheduleHelperProcess(t *testing.T) {
	if os.Getenv(scheduleHelperEnv) == "" {
		t.Skip("runs only as a helper process of the multi-process schedule test")
	}
	if err := scheduleHelper(os.Getenv("LQ_PATH")); err != nil {
		fmt.Fprintln(os.Stderr, "helper failed:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func scheduleHelper(path string) error {
	ctx := context.Background()
	mock := clock.NewMock()
	mock.Set(mpStart)
	var fired atomic.Int64
	q, err := Open(path, &Options{Clock: mock, PollInterval: 10 * time.Millisecond, CompletedRetention: 1000 * time.Hour,
		Queues: []QueueConfig{NewQueueConfig("ticks")},
		OnEvent: func(e Event) {
			if e.Type == EventEnqueued {
				fired.Add(1)
			}
		},
	})
	if err != nil {
		return err
	}
	defer q.Close()
	// The jobs run and complete (kept by the retention), so their keys are
	// free again: a second enqueue of an occurrence would be a second row.
	Register(q, func(ctx context.Context, d *Delivery[Tick]) error { return nil })
	for _, s := range mpSchedules() {
		if _, err := q.RegisterSchedule(ctx, s); err != nil {
			return err
		}
	}
	type round struct {
		now, next time.Time
		wakes     uint64
	}
	rounds := make(chan round, 1024)
	hook := func(now, next time.Time, wakes uint64) { rounds <- round{now, next, wakes} }
	q.scheduleRound.Store(&hook)
	if err := q.Start(ctx); err != nil {
		return err
	}
	// Step from wake-up to wake-up: wait for a round at the clock's time
	// that saw every wake, then move the clock to its next wake-up.
	wait := func(at time.Time) (round, error) {
		q.mu.Lock()
		want := q.run.sched.wakes.Load()
		q.mu.Unlock()
		limit := time.After(time.Minute)
		for {
			select {
			case r := <-rounds:
				if !r.now.Before(at) && r.wakes >= want {
					return r, nil
				}
			case <-limit:
				return round{}, fmt.Errorf("no scheduler round at %s", at)
			}
		}
	}
	r, err := wait(mock.Now())
	if err != nil {
		return err
	}
	for !r.next.IsZero() && !r.next.After(mpEnd) {
		mock.Set(r.next)
		if r, err = wait(r.next); err != nil {
			return err
		}
	}
	if err := q.Stop(ctx); err != nil {
		return err
	}
	fmt.Printf("fired %d\n", fired.Load())
	return nil
}

func TestThreeProcessesEnqueueEveryOccurrenceExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helper processes")
	}
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := Open(path, nil) // the file exists before the processes race
	require.NoError(t, err)
	require.NoError(t, q.Close())

	ctx, cancel := context.WithTimeout(context.Background(), *procWait)
	defer cancel()
	const procs = 3
	outs := make([]bytes.Buffer, procs)
	errs := make([]bytes.Buffer, procs)
	results := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestScheduleHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), scheduleHelperEnv+"=1", "LQ_PATH="+path)
		cmd.Stdout, cmd.Stderr = &outs[i], &errs[i]
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = cmd.Wait()
		}()
	}
	wg.Wait()
	total := 0
	var per []int
	for i := range procs {
		require.NoError(t, results[i], "helper %d: %s", i, errs[i].String())
		out := outs[i].String()
		_, after, ok := strings.Cut(out, "fired ")
		require.True(t, ok, "helper %d printed %q", i, out)
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
		require.NoError(t, err)
		per = append(per, n)
		total += n
	}

	q, err = Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer q.Close()
	want := map[string][]time.Time{}
	for at := mpStart.Add(time.Minute); !at.After(mpEnd); at = at.Add(time.Minute) {
		want["mp-minute"] = append(want["mp-minute"], at)
		if at.Minute()%5 == 0 {
			want["mp-5min-ny"] = append(want["mp-5min-ny"], at)
		}
	}
	for at := mpStart.Add(90 * time.Second); !at.After(mpEnd); at = at.Add(90 * time.Second) {
		want["mp-90s"] = append(want["mp-90s"], at)
	}
	want["mp-daily-ny"] = []time.Time{utc(2026, 3, 8, 7, 30)} // 02:30 does not exist that night: 03:30 EDT
	occurrences := 0
	for name, w := range want {
		require.Equal(t, w, scheduledRunAts(t, q, name), name)
		occurrences += len(w)
		info := scheduleInfo(t, q, name)
		require.Zero(t, info.MissedCount, name)
		hist, err := q.ScheduleHistory(ctx, name, 0)
		require.NoError(t, err)
		enq := 0
		for _, e := range hist {
			require.NotEqual(t, "skipped", e.Type, "%s: %+v", name, e)
			if e.Type == "enqueued" {
				enq++
				require.Empty(t, e.Detail, "%s: %+v", name, e)
			}
		}
		require.Equal(t, len(w), enq, "%s: one enqueued event per occurrence", name)
	}
	require.Equal(t, occurrences, total, "the processes' enqueue events add up to the occurrences")
	var completed int
	require.NoError(t, q.lite.DB().QueryRow(`SELECT count(*) FROM lq_jobs WHERE state = 2`).Scan(&completed))
	t.Logf("%d occurrences of 4 schedules over 3 hours, enqueued by the 3 processes as %v; %d jobs completed", occurrences, per, completed)
}
