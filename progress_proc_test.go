package litequeue

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ProcExport is run by the progress helper process.
type ProcExport struct {
	Rows int `json:"rows"`
}

func (ProcExport) Kind() string { return "proc_export" }

const progressHelperEnv = "LITEQUEUE_PROGRESS_HELPER"

// TestProgressHelperProcess is not a test: it is the body of the worker
// process of TestWatchProgressOfAnotherProcess. Its handler reports half
// the rows, says "reported" on stdout and finishes when stdin ends.
func TestProgressHelperProcess(t *testing.T) {
	path := os.Getenv(progressHelperEnv)
	if path == "" {
		t.Skip("runs only as the helper process of TestWatchProgressOfAnotherProcess")
	}
	if err := progressHelper(path); err != nil {
		fmt.Fprintln(os.Stderr, "helper failed:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func progressHelper(path string) error {
	done := make(chan struct{})
	q, err := Open(path, &Options{CompletedRetention: time.Hour, OnEvent: func(e Event) {
		if e.Type == EventSucceeded {
			close(done)
		}
	}})
	if err != nil {
		return err
	}
	defer q.Close()
	finish := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(finish)
	}()
	Register(q, func(ctx context.Context, d *Delivery[ProcExport]) error {
		if err := d.SetProgress(0.5, fmt.Sprintf("%d of %d rows", d.Job.Rows/2, d.Job.Rows)); err != nil {
			return err
		}
		fmt.Println("reported")
		<-finish
		if err := d.SetProgress(1, "done"); err != nil {
			return err
		}
		return d.SetOutput(map[string]int{"rows": d.Job.Rows})
	})
	if err := q.Start(context.Background()); err != nil {
		return err
	}
	select {
	case <-done:
		return q.Stop(context.Background())
	case <-time.After(*procWait):
		return fmt.Errorf("the job did not succeed within %s", *procWait)
	}
}

func TestWatchProgressOfAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	q, err := Open(path, &Options{PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	id, err := q.Enqueue(ctx, ProcExport{Rows: 1000}, nil)
	require.NoError(t, err)
	ch, err := q.WatchProgress(ctx, id)
	require.NoError(t, err)

	cmd := exec.Command(os.Args[0], "-test.run=^TestProgressHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), progressHelperEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	reported := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "reported" {
				close(reported)
			}
		}
		exited <- cmd.Wait()
	}()

	next := func() (Progress, bool) {
		t.Helper()
		select {
		case p, ok := <-ch:
			return p, ok
		case <-time.After(*procWait):
			t.Fatalf("no progress value within %s\n%s", *procWait, stderr.String())
			return Progress{}, false
		}
	}
	p, ok := next()
	require.True(t, ok)
	require.Equal(t, StateReady, p.State)
	select {
	case <-reported:
	case <-time.After(*procWait):
		t.Fatalf("the helper never reported\n%s", stderr.String())
	}
	for p.State != StateRunning || p.Fraction != 0.5 {
		p, ok = next()
		require.True(t, ok, "the channel closed before the other process's report arrived")
	}
	require.Equal(t, "500 of 1000 rows", p.Message)

	require.NoError(t, stdin.Close())
	for {
		v, ok := next()
		if !ok {
			break
		}
		p = v
	}
	require.Equal(t, StateCompleted, p.State)
	require.Equal(t, 1.0, p.Fraction)
	require.Equal(t, "done", p.Message)
	select {
	case err := <-exited:
		require.NoError(t, err, stderr.String())
	case <-time.After(*procWait):
		t.Fatalf("the helper did not exit\n%s", stderr.String())
	}
	j, err := q.Job(ctx, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"rows":1000}`, string(j.Output))
}
