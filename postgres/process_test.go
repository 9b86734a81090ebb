package postgres_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

// The tests in this file run queues in other processes: they re-execute
// this test binary with helperEnv set, which makes TestHelperProcess be one
// worker process and exit. Processes use the real clock, so the parent waits
// for them in real time, always bounded by procWait.

const helperEnv = "LITEQUEUE_PG_HELPER"

const procWait = 3 * time.Minute

// Work is the job of these tests; its handler records each run.
type Work struct {
	N int `json:"n"`
}

func (Work) Kind() string { return "work" }

// runsTable records every handler run: job, attempt, process.
const runsTable = "lqt_runs"

// workerOptions configures a test worker: 4 handlers, short leases so that a
// killed worker's jobs come back soon, and attempts enough for any number of
// kills.
func workerOptions() *litequeue.Options {
	qc := litequeue.NewQueueConfig(litequeue.DefaultQueue)
	qc.Concurrency = 4
	qc.VisibilityTimeout = 2 * time.Second
	qc.Retry = litequeue.FixedRetry(10000, 10*time.Millisecond)
	return &litequeue.Options{Queues: []litequeue.QueueConfig{qc}, PollInterval: 200 * time.Millisecond}
}

// registerRecorder makes q's Work handler record each run in runsTable
// through db, then wait sleep.
func registerRecorder(q *litequeue.Queue, db *sql.DB, sleep time.Duration) {
	pid := os.Getpid()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Work]) error {
		if _, err := db.ExecContext(ctx, `INSERT INTO `+runsTable+` (job_id, attempt, pid) VALUES ($1, $2, $3)`, d.ID, d.Attempt, pid); err != nil {
			return err
		}
		time.Sleep(sleep) // the handler's work, in real time: these queues run in real processes
		return nil
	})
}

// TestHelperProcess is a worker process when helperEnv is set: it runs the
// queue at LQPG_URL until its stdin closes (then stops gracefully) or it is
// killed. It prints "ready" once started.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "worker" {
		t.Skip("a helper process for the other tests")
	}
	u := os.Getenv("LQPG_URL")
	sleep, _ := time.ParseDuration(os.Getenv("LQPG_SLEEP"))
	ctx := context.Background()
	q, err := postgres.Open(ctx, u, workerOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		os.Exit(2)
	}
	registerRecorder(q, db, sleep)
	if err := q.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	stop, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := q.Stop(stop); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
	}
	q.Close()
	os.Exit(0)
}

// worker is a running worker process.
type worker struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
}

func startWorker(t *testing.T, u string, sleep time.Duration) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"=worker", "LQPG_URL="+u, "LQPG_SLEEP="+sleep.String())
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
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("worker said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("worker did not start: %v", err)
		}
	case <-time.After(procWait):
		cmd.Process.Kill()
		t.Fatal("worker did not start in time")
	}
	return &worker{cmd: cmd, stdin: in}
}

func (w *worker) stop(t *testing.T) {
	w.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("worker %d: %v", w.cmd.Process.Pid, err)
		}
	case <-time.After(procWait):
		w.cmd.Process.Kill()
		t.Errorf("worker %d did not stop", w.cmd.Process.Pid)
	}
}

func (w *worker) kill() {
	w.cmd.Process.Signal(syscall.SIGKILL)
	w.cmd.Wait()
}

// setupRuns makes a fresh schema with the queue's tables and the runs table,
// enqueues n Work jobs, and returns the URL and an admin connection to the
// schema.
func setupRuns(t *testing.T, n int) (string, *sql.DB) {
	t.Helper()
	u, _ := pgtest.FreshSchema(t)
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE ` + runsTable + ` (job_id bigint NOT NULL, attempt integer NOT NULL, pid integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	q, err := postgres.Open(context.Background(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]litequeue.BatchItem, n)
	for i := range items {
		items[i] = litequeue.BatchItem{Job: Work{N: i}}
	}
	if _, err := q.EnqueueBatch(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return u, db
}

// waitDrained waits until no job is left.
func waitDrained(t *testing.T, db *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(procWait)
	for {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM lq_jobs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs left after %s", n, procWait)
		}
		// Other processes' writes notify this test of nothing: poll the
		// table, bounded by the deadline above.
		time.Sleep(50 * time.Millisecond)
	}
}

// checkRuns checks that each of the n jobs ran, never twice under one lease
// (one attempt), and, if once, exactly once.
func checkRuns(t *testing.T, db *sql.DB, n int, once bool) {
	t.Helper()
	var jobs, runs, dupAttempts int
	if err := db.QueryRow(`SELECT count(DISTINCT job_id), count(*) FROM `+runsTable).Scan(&jobs, &runs); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM ` + runsTable + ` GROUP BY job_id, attempt HAVING count(*) > 1) d`).Scan(&dupAttempts); err != nil {
		t.Fatal(err)
	}
	if jobs != n {
		t.Errorf("%d jobs ran, want %d", jobs, n)
	}
	if dupAttempts != 0 {
		t.Errorf("%d jobs ran twice under one lease (same attempt)", dupAttempts)
	}
	if once && runs != n {
		t.Errorf("%d runs of %d jobs, want each exactly once", runs, n)
	}
	var dead int
	if err := db.QueryRow(`SELECT count(*) FROM lq_jobs WHERE state = 3`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead != 0 {
		t.Errorf("%d dead letters", dead)
	}
}

func TestThreeProcessesRunTenThousandJobsExactlyOnce(t *testing.T) {
	const n = 10000
	u, db := setupRuns(t, n)
	var ws []*worker
	for range 3 {
		ws = append(ws, startWorker(t, u, 0))
	}
	waitDrained(t, db)
	for _, w := range ws {
		w.stop(t)
	}
	checkRuns(t, db, n, true)
	var pids int
	db.QueryRow(`SELECT count(DISTINCT pid) FROM ` + runsTable).Scan(&pids)
	t.Logf("%d jobs ran in %d processes", n, pids)
}

func TestKilledWorkerProcessesLoseNothing(t *testing.T) {
	const n = 4000
	const kills = 60
	u, db := setupRuns(t, n)
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 7))
	ws := []*worker{startWorker(t, u, 2*time.Millisecond), startWorker(t, u, 2*time.Millisecond), startWorker(t, u, 2*time.Millisecond)}
	for k := 0; k < kills; k++ {
		// A kill comes at a random moment of the workers' real-time work:
		// the wait is the point.
		time.Sleep(time.Duration(10+rng.IntN(60)) * time.Millisecond)
		i := rng.IntN(len(ws))
		ws[i].kill()
		ws[i] = startWorker(t, u, 2*time.Millisecond)
	}
	waitDrained(t, db)
	for _, w := range ws {
		w.stop(t)
	}
	checkRuns(t, db, n, false)
	var runs int
	db.QueryRow(`SELECT count(*) FROM ` + runsTable).Scan(&runs)
	t.Logf("%d kills; %d jobs ran %d times in all", kills, n, runs)
}

func TestTerminatedConnectionsReconnectAndLoseNothing(t *testing.T) {
	const n = 3000
	u, db := setupRuns(t, n)
	b := make([]byte, 4)
	rand.Read(b)
	app := "lqt_" + hex.EncodeToString(b)
	qu := pgtest.WithParam(t, u, "application_name", app)
	q, err := postgres.Open(context.Background(), qu, workerOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	registerRecorder(q, db, time.Millisecond)
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	terminate := func() int {
		var k int
		if err := db.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	killed := 0
	for round := 0; round < 5; round++ {
		// Let the workers reconnect and work (real processes, real time)
		// before the next round of terminations: the wait is the point.
		time.Sleep(100 * time.Millisecond)
		killed += terminate()
	}
	if killed == 0 {
		t.Fatal("no connection of the queue was terminated")
	}
	waitDrained(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	if err := q.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	checkRuns(t, db, n, false)
	var runs int
	db.QueryRow(`SELECT count(*) FROM ` + runsTable).Scan(&runs)
	t.Logf("%d connections terminated; %d jobs ran %d times in all", killed, n, runs)
}
