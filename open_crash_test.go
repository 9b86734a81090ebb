//go:build unix

package litequeue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/stretchr/testify/require"
)

// openCrashEnv tells a re-executed test binary to be a process doing a
// first-time Open: "die:STEP:PATH" kills itself with SIGKILL at STEP;
// "mark:STEP:PATH" prints STEP on stdout when it gets there and goes on, so
// the parent can kill it at an arbitrary moment after that step.
const openCrashEnv = "LQ_OPEN_CRASH"

// openSteps are the named steps of a first Open, in order (see openStep).
var openSteps = []string{"created", "identified", "wal", "schema-written", "migrated"}

// TestOpenCrashHelper is not a test: it is the body of the process that
// TestOpenKilledAtAnyMomentLeavesAWorkingQueue kills.
func TestOpenCrashHelper(t *testing.T) {
	spec := os.Getenv(openCrashEnv)
	if spec == "" {
		t.Skip("runs only as a helper process of TestOpenKilledAtAnyMomentLeavesAWorkingQueue")
	}
	mode, rest, _ := strings.Cut(spec, ":")
	at, path, _ := strings.Cut(rest, ":")
	sqlitefile.OpenHook = func(step string) {
		if step != at {
			return
		}
		if mode == "die" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
		fmt.Println(step)
	}
	if mode == "mark" && at == "start" {
		fmt.Println("start")
	}
	q, err := Open(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	// Not killed in time: leave the queue as a finished Open would.
	_ = q.Close()
	os.Exit(0)
}

// TestOpenKilledAtAnyMomentLeavesAWorkingQueue kills a process inside its
// first Open of a new file, at each named step and at seeded moments after
// the start, after the WAL switch begins and during schema creation, then
// opens every file left behind and checks it is a working queue.
func TestOpenKilledAtAnyMomentLeavesAWorkingQueue(t *testing.T) {
	rng := killSchedule(t)
	dir := t.TempDir()
	type victim struct {
		name, path string
		killed     bool
	}
	var victims []victim
	run := func(name, spec string, delay time.Duration) {
		path := filepath.Join(dir, fmt.Sprintf("%03d.db", len(victims)))
		mode, at, _ := strings.Cut(spec, ":")
		cmd := exec.Command(os.Args[0], "-test.run=^TestOpenCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), openCrashEnv+"="+mode+":"+at+":"+path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		if mode == "mark" {
			// Wait for the step, then kill after delay (a real-time wait:
			// the point is to land the kill at an arbitrary moment of the
			// other process's work).
			sc := bufio.NewScanner(out)
			for sc.Scan() && sc.Text() != at {
			}
			time.Sleep(delay)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		_, _ = bufio.NewReader(out).ReadString(0)
		err = cmd.Wait()
		var ee *exec.ExitError
		killed := false
		if errors.As(err, &ee) {
			ws, ok := ee.Sys().(syscall.WaitStatus)
			killed = ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
			require.True(t, killed, "%s: helper failed: %v\n%s", name, err, stderr.String())
		} else {
			require.NoError(t, err, "%s\n%s", name, stderr.String())
		}
		victims = append(victims, victim{name: name, path: path, killed: killed})
	}
	for _, step := range openSteps {
		run("die at "+step, "die:"+step, 0)
	}
	for i := range 40 {
		at := []string{"start", "created", "identified", "wal"}[i%4]
		d := time.Duration(rng.Int64N(int64(3 * time.Millisecond)))
		run(fmt.Sprintf("kill %s after %s", at, d), "mark:"+at, d)
	}
	sizes := map[string]int{}
	killed := 0
	for _, v := range victims {
		if v.killed {
			killed++
		}
		st, err := os.Stat(v.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			sizes["no file"]++
		case err != nil:
			t.Fatal(err)
		case st.Size() == 0:
			sizes["0 bytes"]++
		default:
			sizes["written"]++
		}
		q, err := Open(v.path, nil)
		require.NoError(t, err, "%s: the file left behind does not open", v.name)
		ctx := context.Background()
		id, err := q.Enqueue(ctx, SendEmail{To: v.name}, nil)
		require.NoError(t, err, v.name)
		j, err := q.Job(ctx, id)
		require.NoError(t, err, v.name)
		require.Equal(t, StateReady, j.State, v.name)
		require.NoError(t, q.Close())
		checkInvariants(t, v.path)
	}
	t.Logf("%d first-time Opens, %d killed inside; files left: %v", len(victims), killed, sizes)
	require.GreaterOrEqual(t, killed, len(openSteps), "the die-at-step helpers were not killed")
	require.Positive(t, sizes["0 bytes"], "no kill left a 0-byte file (the case this test is for)")
}
