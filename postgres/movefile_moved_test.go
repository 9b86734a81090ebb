//go:build unix

package postgres

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
)

// The tests in this file run the application that used a queue file, and
// the move itself, in processes of their own: they re-execute this test
// binary with moveHelperEnv set, which makes TestMoveHelperProcess play
// that role and exit.

const moveHelperEnv = "LITEQUEUE_MOVE_HELPER"

// TestMoveHelperProcess is, by moveHelperEnv:
//
//   - "app": the application of the file LQ_FILE: it opens the file, runs
//     every moveJob (printing "ran ID" for each) until none is left, and
//     exits 0; when Open refuses the file it prints the error and exits 3
//     for ErrMoved (with the *MovedError's destination on a line "to URL"),
//     2 otherwise.
//   - "move STEP": MoveFile of LQ_FILE to LQ_URL, killed (SIGKILL) when its
//     MoveOptions.Progress reports the MoveStep STEP.
func TestMoveHelperProcess(t *testing.T) {
	role := os.Getenv(moveHelperEnv)
	if role == "" {
		t.Skip("a helper process for the other tests")
	}
	file := os.Getenv("LQ_FILE")
	if step, ok := strings.CutPrefix(role, "move "); ok {
		kill := func(s MoveStep) {
			if s == MoveStep(step) {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
		if _, err := MoveFileWith(context.Background(), file, os.Getenv("LQ_URL"), &MoveOptions{Progress: kill}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	q, err := litequeue.Open(file, &litequeue.Options{PollInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		var m *litequeue.MovedError
		if errors.As(err, &m) {
			fmt.Printf("to %s\ncomplete %v\n", m.To, m.Complete)
			os.Exit(3)
		}
		os.Exit(2)
	}
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[moveJob]) error {
		fmt.Printf("ran %d\n", d.ID)
		return nil
	})
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		jobs, err := q.Jobs(ctx, litequeue.JobFilter{States: []litequeue.State{litequeue.StateReady, litequeue.StateRunning}})
		if err == nil && len(jobs) == 0 {
			break
		}
	}
	q.Stop(ctx)
	q.Close()
	os.Exit(0)
}

// helper runs TestMoveHelperProcess as role with env, and returns its exit
// code and output.
func helper(t *testing.T, role string, env ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMoveHelperProcess$")
	cmd.Env = append(append(os.Environ(), moveHelperEnv+"="+role), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		code = ee.ExitCode()
	case errors.As(err, &ee):
		code = -int(ee.Sys().(syscall.WaitStatus).Signal())
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// pendingFile is a stopped queue file with n pending moveJobs.
func pendingFile(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := q.Enqueue(context.Background(), moveJob{N: i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// withPassword puts a password into u's user information (the test server
// trusts local connections, so it does not ask for it).
func withPassword(t *testing.T, u, password string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.UserPassword(pu.User.Username(), password)
	return pu.String()
}

// pgJobs counts the jobs of the schema of u, and how many distinct ids.
func pgJobs(t *testing.T, admin *sql.DB, u string) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(`SELECT count(*) FROM ` + quoteIdent(schemaOf(t, u)) + `.lq_jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// After a move the application that used the file, restarted on it, runs
// none of the moved jobs (PostgreSQL runs them): its Open fails with
// ErrMoved naming the destination, password masked. Read-only inspection
// still reads the file.
func TestAMovedFileIsNotRunAgainByItsApplication(t *testing.T) {
	path := pendingFile(t, 20)
	u, admin := freshSchema(t)
	u = withPassword(t, u, "s3cret-pw")
	m, err := MoveFile(context.Background(), path, u)
	if err != nil {
		t.Fatal(err)
	}
	if m.Pending != 20 {
		t.Fatalf("moved %+v, want 20 pending", m)
	}
	code, out, errOut := helper(t, "app", "LQ_FILE="+path)
	if code != 3 {
		t.Fatalf("the application on the moved file exited %d, want 3 (ErrMoved); it ran %d jobs; stderr: %s", code, strings.Count(out, "ran "), errOut)
	}
	for _, want := range []string{"moved to PostgreSQL", "xxxxx@", "schema \"" + schemaOf(t, u) + "\"", "opens read-only only"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the error does not say %q: %s", want, errOut)
		}
	}
	if strings.Contains(out+errOut, "s3cret-pw") {
		t.Errorf("the password is shown: %s %s", out, errOut)
	}
	if !strings.Contains(out, "complete true") {
		t.Errorf("the move is not recorded complete: %s", out)
	}
	ro, err := litequeue.Open(path, &litequeue.Options{ReadOnly: true, PollInterval: -1})
	if err != nil {
		t.Fatalf("a read-only open of the moved file: %v", err)
	}
	defer ro.Close()
	jobs, err := ro.Jobs(context.Background(), litequeue.JobFilter{})
	if err != nil || len(jobs) != 20 {
		t.Fatalf("read-only jobs: %d, %v", len(jobs), err)
	}
	if n := pgJobs(t, admin, u); n != 20 {
		t.Fatalf("PostgreSQL has %d jobs, want 20", n)
	}
}

// A move killed after it marked the file, or after PostgreSQL committed the
// copy but before the file recorded the end, leaves a file its application
// refuses (the move did not finish); running the move again finishes it,
// and PostgreSQL holds each job once.
func TestAMoveKilledAtAnyStepNeverLetsTheFileRunItsJobs(t *testing.T) {
	for _, step := range []MoveStep{MoveMarked, MoveCopied} {
		t.Run(string(step), func(t *testing.T) {
			path := pendingFile(t, 20)
			u, admin := freshSchema(t)
			code, _, errOut := helper(t, "move "+string(step), "LQ_FILE="+path, "LQ_URL="+u)
			if code != -int(syscall.SIGKILL) {
				t.Fatalf("the move exited %d, want killed at %s: %s", code, step, errOut)
			}
			wantPG := map[MoveStep]int{MoveMarked: 0, MoveCopied: 20}[step]
			if n := pgJobs(t, admin, u); n != wantPG {
				t.Fatalf("PostgreSQL has %d jobs after a kill at %s, want %d", n, step, wantPG)
			}
			code, out, errOut := helper(t, "app", "LQ_FILE="+path)
			if code != 3 || !strings.Contains(out, "complete false") || !strings.Contains(errOut, "did not finish") {
				t.Fatalf("the application exited %d after a move killed at %s, want 3 and an unfinished move; ran %d jobs; %s %s",
					code, step, strings.Count(out, "ran "), out, errOut)
			}
			m, err := MoveFile(context.Background(), path, u)
			if err != nil {
				t.Fatal(err)
			}
			if m.Pending+m.Skipped != 20 || m.Pending != 20-wantPG {
				t.Fatalf("the second move: %+v", m)
			}
			if n := pgJobs(t, admin, u); n != 20 {
				t.Fatalf("PostgreSQL has %d jobs, want 20", n)
			}
			code, out, _ = helper(t, "app", "LQ_FILE="+path)
			if code != 3 || !strings.Contains(out, "complete true") {
				t.Fatalf("after the second move the application exited %d: %s", code, out)
			}
		})
	}
}

// A move that copies nothing (PostgreSQL refuses it) takes its mark back:
// the file is its application's again.
func TestAFailedMoveLeavesTheFileWritable(t *testing.T) {
	path := pendingFile(t, 3)
	u, admin := freshSchema(t)
	q, err := Open(context.Background(), u, &litequeue.Options{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(context.Background(), moveJob{N: 99}, nil); err != nil { // takes id 1
		t.Fatal(err)
	}
	q.Close()
	if _, err := MoveFile(context.Background(), path, u); err == nil || !strings.Contains(err.Error(), "already has jobs with the file's ids") {
		t.Fatalf("MoveFile: %v, want the ids refused", err)
	}
	if n := pgJobs(t, admin, u); n != 1 {
		t.Fatalf("PostgreSQL has %d jobs, want its own 1", n)
	}
	code, out, errOut := helper(t, "app", "LQ_FILE="+path)
	if code != 0 || strings.Count(out, "ran ") != 3 {
		t.Fatalf("the application on the file exited %d and ran %d jobs, want 0 and 3: %s", code, strings.Count(out, "ran "), errOut)
	}
}

// A file moved to one PostgreSQL queue is not moved to another.
func TestMoveFileRefusesAFileMovedElsewhere(t *testing.T) {
	path := pendingFile(t, 2)
	a, _ := freshSchema(t)
	b, adminB := freshSchema(t)
	if _, err := MoveFile(context.Background(), path, a); err != nil {
		t.Fatal(err)
	}
	_, err := MoveFile(context.Background(), path, b)
	if err == nil || !strings.Contains(err.Error(), "moved to PostgreSQL") || !strings.Contains(err.Error(), "would run them twice") {
		t.Fatalf("MoveFile to a second queue: %v", err)
	}
	var n int
	adminB.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'lq_jobs'`, schemaOf(t, b)).Scan(&n)
	if n == 1 && pgJobs(t, adminB, b) != 0 {
		t.Fatal("jobs copied to the second queue")
	}
	// The first queue, spelt otherwise, is the same queue: the move is
	// idempotent there.
	if m, err := MoveFile(context.Background(), path, withParam(t, a, "application_name", "again")); err != nil || m.Skipped != 2 {
		t.Fatalf("MoveFile again to the same queue: %+v %v", m, err)
	}
}
