package litestreamtest

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/litequeue/litequeue"

	_ "modernc.org/sqlite"
)

// LitestreamVersion is the Litestream the tests are run with in CI.
const LitestreamVersion = "v0.5.18"

// litestream returns the litestream binary: LITEQUEUE_LITESTREAM, or
// litestream on PATH. Without one the test skips, or fails with
// LITEQUEUE_REQUIRE_LITESTREAM=1 (CI sets it).
func litestream(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LITEQUEUE_LITESTREAM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("litestream"); err == nil {
		return p
	}
	msg := "this test runs a real Litestream, which is not installed: go install github.com/benbjohnson/litestream/cmd/litestream@" + LitestreamVersion + " (or set LITEQUEUE_LITESTREAM to its path)"
	if os.Getenv("LITEQUEUE_REQUIRE_LITESTREAM") == "1" {
		t.Fatal(msg + " (LITEQUEUE_REQUIRE_LITESTREAM=1: it is required)")
	}
	t.Skip(msg)
	return ""
}

// job is the workload's job.
type job struct{ N int }

func (job) Kind() string { return "ls_job" }

// replicator is a running `litestream replicate` of one file to a file
// replica.
type replicator struct {
	bin, config, replica string
	cmd                  *exec.Cmd
	log                  *syncBuffer
}

func startReplicator(t *testing.T, bin, dir, path string) *replicator {
	t.Helper()
	r := &replicator{bin: bin, config: filepath.Join(dir, "litestream.yml"), replica: filepath.Join(dir, "replica"), log: &syncBuffer{}}
	cfg := fmt.Sprintf("dbs:\n  - path: %s\n    monitor-interval: 50ms\n    replica:\n      type: file\n      path: %s\n      sync-interval: 100ms\n", path, r.replica)
	if err := os.WriteFile(r.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "replicate", "-config", r.config, "-log-level", "debug")
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		_ = r.cmd.Wait()
		if t.Failed() {
			t.Logf("litestream's log:\n%s", r.log.String())
		}
	})
	return r
}

// restore restores the replica's latest state into a new file out.
func (r *replicator) restore(out string) error {
	cmd := exec.Command(r.bin, "restore", "-o", out, "file://"+r.replica)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("litestream restore: %v: %s", err, b)
	}
	return nil
}

// restored is what a restored queue file holds.
type restored struct {
	jobs    map[int64]litequeue.State
	effects map[int64]bool
}

// check opens a restored file and returns what it holds, or what is wrong
// with it: integrity_check, the queue's own opening and Stats, and
// completed jobs exactly where the application's effect rows are.
func check(path string) (*restored, []string) {
	var bad []string
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, []string{err.Error()}
	}
	defer db.Close()
	var ic string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&ic); err != nil || ic != "ok" {
		return nil, []string{fmt.Sprintf("integrity_check: %q %v", ic, err)}
	}
	r := &restored{jobs: map[int64]litequeue.State{}, effects: map[int64]bool{}}
	rows, err := db.Query("SELECT id, state FROM lq_jobs")
	if err != nil {
		return nil, []string{err.Error()}
	}
	for rows.Next() {
		var id int64
		var st int
		if err := rows.Scan(&id, &st); err != nil {
			return nil, []string{err.Error()}
		}
		r.jobs[id] = map[int]litequeue.State{0: litequeue.StateReady, 1: litequeue.StateRunning, 2: litequeue.StateCompleted}[st]
	}
	rows.Close()
	rows, err = db.Query("SELECT job_id FROM ls_effects")
	if err != nil {
		return nil, []string{err.Error()}
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, []string{err.Error()}
		}
		r.effects[id] = true
	}
	rows.Close()
	for id, st := range r.jobs {
		if (st == litequeue.StateCompleted) != r.effects[id] {
			bad = append(bad, fmt.Sprintf("job %d is %s, its effect row there: %v", id, st, r.effects[id]))
		}
	}
	for id := range r.effects {
		if _, ok := r.jobs[id]; !ok {
			bad = append(bad, fmt.Sprintf("effect row of job %d without the job", id))
		}
	}
	db.Close()
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		return r, append(bad, fmt.Sprintf("the restored file does not open as a queue: %v", err))
	}
	if _, err := q.Stats(context.Background()); err != nil {
		bad = append(bad, fmt.Sprintf("Stats: %v", err))
	}
	if err := q.Close(); err != nil {
		bad = append(bad, fmt.Sprintf("Close: %v", err))
	}
	return r, bad
}

// TestLitestreamReplicaRestoresAConsistentQueue replicates a busy queue
// file (producers enqueueing, a worker completing jobs with CompleteTx in
// the application's transactions) with a real Litestream to a file
// replica, restores the replica at random moments while it runs, and
// checks each restored file: it is consistent (integrity_check, opens as a
// queue, a job is completed exactly when its effect row is there) and
// holds every job acknowledged before the replica's position (every
// acknowledged job with an id below the highest it holds: ids are
// allocated in commit order). At the end, with the load stopped and the
// queue closed (Close's checkpoint while Litestream runs), the replica
// catches up with every acknowledged job.
func TestLitestreamReplicaRestoresAConsistentQueue(t *testing.T) {
	bin := litestream(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opts := &litequeue.Options{CompletedRetention: time.Hour, PollInterval: 50 * time.Millisecond,
		Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(1000, 0), Concurrency: 2}}}
	q, err := litequeue.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE ls_effects (job_id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[job]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO ls_effects (job_id) VALUES (?)`, d.ID); err != nil {
			return err
		}
		if err := d.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r := startReplicator(t, bin, dir, path)

	var mu sync.Mutex
	var acked []int64 // acknowledged enqueues, in the order they returned
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id, err := q.Enqueue(ctx, job{N: i}, nil)
				if err != nil {
					t.Errorf("Enqueue: %v", err)
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
				// A busy but not saturated producer (about 500 jobs/s
				// each), so that the replica's files stay small.
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	ackedSoFar := func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(acked)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	restores := 8
	var lags []int
	for i := range restores {
		// The moments of the restores: 100-600 ms apart, while the load runs.
		time.Sleep(100*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond))))
		before := ackedSoFar()
		out := filepath.Join(dir, fmt.Sprintf("restore-%d.db", i))
		if err := r.restore(out); err != nil {
			if strings.Contains(err.Error(), "no matching backup") || strings.Contains(err.Error(), "no snapshots") {
				continue // nothing replicated yet
			}
			t.Fatal(err)
		}
		got, bad := check(out)
		if len(bad) > 0 {
			t.Fatalf("restore %d: %s", i, strings.Join(bad, "; "))
		}
		var top int64
		for id := range got.jobs {
			top = max(top, id)
		}
		lag := 0
		for _, id := range before {
			_, ok := got.jobs[id]
			switch {
			case id <= top && !ok:
				t.Fatalf("restore %d holds jobs up to id %d but not acknowledged job %d", i, top, id)
			case id > top:
				lag++
			}
		}
		lags = append(lags, lag)
	}
	stop.Store(true)
	wg.Wait()
	all := ackedSoFar()
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := q.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// A queue made by Open, whose Close runs a TRUNCATE checkpoint, while
	// Litestream runs.
	oq, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		id, err := oq.Enqueue(ctx, job{N: -i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, id)
	}
	// Litestream (another process, on its own real-time sync interval of
	// 100 ms) gets three syncs of these writes before the Close's TRUNCATE
	// checkpoint; a shorter wait cannot make the test pass wrongly.
	time.Sleep(300 * time.Millisecond)
	if err := oq.Close(); err != nil {
		t.Fatal(err)
	}
	// The replica catches up: a restore holds every acknowledged job.
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		out := filepath.Join(dir, fmt.Sprintf("final-%d.db", n))
		if err := r.restore(out); err != nil {
			t.Fatal(err)
		}
		got, bad := check(out)
		if len(bad) > 0 {
			t.Fatalf("final restore: %s", strings.Join(bad, "; "))
		}
		missing := 0
		for _, id := range all {
			if _, ok := got.jobs[id]; !ok {
				missing++
			}
		}
		if missing == 0 {
			t.Logf("%d jobs acknowledged; %d restores during the load, each missing only the jobs acknowledged after its position (%v of them); the replica caught up after %d more restores",
				len(all), len(lags), lags, n+1)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the load stopped the replica still lacks %d of %d acknowledged jobs", missing, len(all))
		}
		time.Sleep(200 * time.Millisecond) // Litestream syncs every 100 ms here
	}
	// Neither the queue's checkpoints nor Close's TRUNCATE checkpoint reset
	// the WAL under Litestream (its read transaction holds the WAL, so the
	// truncation is refused as busy and Close goes on): Litestream never had
	// to take a new snapshot because the WAL was rewritten behind it.
	if reasons := snapshotReasons(r.log.String()); reasons != "" {
		t.Fatalf("the queue's checkpoints made Litestream snapshot again: %s", reasons)
	}
}

// snapshotReasons lists the lines of Litestream's log that say it found
// the WAL reset or overwritten by another process.
func snapshotReasons(log string) string {
	var rs []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "by another process") || strings.Contains(line, "salt reset") || strings.Contains(line, "restart checkpoint detected") {
			rs = append(rs, strings.TrimSpace(line))
		}
	}
	return strings.Join(rs, "; ")
}

// syncBuffer is a bytes.Buffer safe for a process's output and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
