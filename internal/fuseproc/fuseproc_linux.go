package fuseproc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
)

// envMount and envArg carry the mount point and the argument to the server
// process.
const (
	envMount = "LQ_FUSEPROC_MOUNT"
	envArg   = "LQ_FUSEPROC_ARG"
)

// RequireEnv makes a file system that cannot be mounted a test failure
// instead of a skip when it is "1".
const RequireEnv = "LITEQUEUE_REQUIRE_FUSE"

// FS is a file system served by Serve.
type FS interface {
	// Mount mounts the file system on dir.
	Mount(dir string) error
	// Command carries out one command line and returns the one-line answer.
	Command(line string) string
	// Unmount unmounts it, at the end.
	Unmount() error
}

// Serve is the body of a helper test function (TestXxxFSHelper) that
// Start runs in a process of its own: there it makes the file system with
// newFS(arg), mounts it, prints "ready", answers each line of stdin with
// Command's answer, and at EOF unmounts and exits the process. In any other
// run of the test binary it skips t.
func Serve(t *testing.T, newFS func(arg string) (FS, error)) {
	mnt, arg := os.Getenv(envMount), os.Getenv(envArg)
	if mnt == "" {
		t.Skip("runs only as the FUSE server of a file system test (package fuseproc)")
	}
	f, err := newFS(arg)
	if err == nil {
		err = f.Mount(mnt)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(f.Command(sc.Text()))
	}
	if err := f.Unmount(); err != nil {
		fmt.Fprintln(os.Stderr, "unmount:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Mount is a file system mounted by a server process.
type Mount struct {
	// Dir is where it is mounted.
	Dir string

	t   testing.TB
	in  io.WriteCloser
	out *bufio.Scanner
}

// Start mounts, on a new directory, the file system that the helper test
// named helper serves (with Serve), passing it arg. It skips t when FUSE
// cannot be mounted here (no /dev/fuse, not root, a kernel without FUSE),
// or fails it with LITEQUEUE_REQUIRE_FUSE=1. The file system is unmounted
// when t ends.
func Start(t testing.TB, helper, arg string) *Mount {
	t.Helper()
	mnt := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), envMount+"="+mnt, envArg+"="+arg)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		in.Close()
		_ = cmd.Wait()
		msg := fmt.Sprintf("this test runs the queue on a FUSE file system, which cannot be mounted here (%s): it needs Linux, /dev/fuse and root (or CAP_SYS_ADMIN); on Debian, apt-get install fuse3", sc.Text())
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal(msg + " (" + RequireEnv + "=1: FUSE is required)")
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("FUSE server %s: %v", helper, err)
		}
	})
	return &Mount{Dir: mnt, t: t, in: in, out: sc}
}

// Command sends one command line to the server and returns its answer.
func (m *Mount) Command(c string) string {
	m.t.Helper()
	if _, err := fmt.Fprintln(m.in, c); err != nil {
		m.t.Fatalf("FUSE server: %v", err)
	}
	if !m.out.Scan() {
		m.t.Fatalf("FUSE server gone after %q", c)
	}
	return m.out.Text()
}

// SetT makes later Commands report to t (a subtest's).
func (m *Mount) SetT(t testing.TB) { m.t = t }
