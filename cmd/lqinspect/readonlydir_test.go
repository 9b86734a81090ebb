//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mainEnv makes TestLqinspectProcess run lqinspect with the arguments it
// holds (a JSON array) and exit: lqinspect in a process of its own.
const mainEnv = "LQINSPECT_TEST_MAIN"

func TestLqinspectProcess(t *testing.T) {
	spec := os.Getenv(mainEnv)
	if spec == "" {
		t.Skip("helper: runs lqinspect in a process of its own")
	}
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil {
		panic(err)
	}
	os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
}

// unprivileged returns a way to run lqinspect in a process that cannot
// write dir: as user nobody through setpriv when the test runs as root
// (for root, permissions stop nothing), or as the test's own user with dir
// made read-only. dir is made world-readable. It skips when neither is
// possible.
func unprivileged(t *testing.T, dir string) func(args ...string) result {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	var prefix []string
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("running as root without setpriv: no honest way to lose the write permission; install util-linux")
		}
		// The test binary's own directory is private: run a copy.
		bin, err := os.MkdirTemp("", "lqinspect-bin-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(bin) })
		require.NoError(t, os.Chmod(bin, 0o755))
		b, err := os.ReadFile(exe)
		require.NoError(t, err)
		exe = filepath.Join(bin, "lqinspect.test")
		require.NoError(t, os.WriteFile(exe, b, 0o755))
		prefix = []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
		require.NoError(t, os.Chmod(dir, 0o755))
	} else {
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	return func(args ...string) result {
		t.Helper()
		spec, _ := json.Marshal(args)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, prefix[0], append(prefix[1:], exe, "-test.run=^TestLqinspectProcess$")...)
		if prefix == nil {
			cmd = exec.CommandContext(ctx, exe, "-test.run=^TestLqinspectProcess$")
		}
		cmd.Env = append(os.Environ(), mainEnv+"="+string(spec), envNow+"="+fixtureNow.Format(time.RFC3339))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}
}

// sharedDir is a new directory under the system's temporary directory
// (which every user may enter), removed when the test ends.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lqinspect-ro-")
	require.NoError(t, err)
	t.Cleanup(func() {
		os.Chmod(dir, 0o755)
		os.RemoveAll(dir)
	})
	return dir
}

func copyBytes(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// A cleanly closed queue file (no -wal) in a directory the user cannot
// write is read by every read command, which write nothing there.
func TestReadCommandsWorkInADirectoryTheUserCannotWrite(t *testing.T) {
	dir := sharedDir(t)
	path := filepath.Join(dir, "queue.db")
	copyBytes(t, scheduleFile(t), path)
	require.NoFileExists(t, path+"-wal")
	before := dirState(t, dir)
	lqx := unprivileged(t, dir)
	for _, args := range [][]string{{"stats", path}, {"jobs", path}, {"show", path, "1"}, {"dead", path}, {"schedules", path}, {"stats", path, "--json"}} {
		r := lqx(args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		require.NotEmpty(t, r.stdout, "%v", args)
	}
	require.Equal(t, before, dirState(t, dir), "a read command wrote to the directory")

	// A writing command says the file is not writable, and writes nothing.
	r := lqx("pause", path, "reports")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, "not writable")
	require.Equal(t, before, dirState(t, dir))
}

// A -wal beside the file (a process has it open, or did not close it) needs
// a -shm to be read, which a directory the user cannot write does not
// take: the error says so, and what to do.
func TestAWalInADirectoryTheUserCannotWriteIsExplained(t *testing.T) {
	fx := newFixture(t) // its queue keeps running: queue.db-wal exists
	dir := sharedDir(t)
	path := filepath.Join(dir, "queue.db")
	copyBytes(t, fx.path, path)
	copyBytes(t, fx.path+"-wal", path+"-wal")
	lqx := unprivileged(t, dir)
	r := lqx("stats", path)
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, path+"-wal exists")
	require.Contains(t, r.stderr, "cannot create the -shm")
	require.Contains(t, r.stderr, "copy the file with its -wal")
}
