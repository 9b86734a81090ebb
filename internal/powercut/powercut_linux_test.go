package powercut

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/fuseproc"
)

// fsServer serves an FS for fuseproc; its arg is the directory Cut dumps
// the durable files into.
type fsServer struct {
	fs   *FS
	dump string
}

func (s *fsServer) Mount(dir string) error { return s.fs.Mount(dir) }
func (s *fsServer) Unmount() error         { return s.fs.Unmount() }

// Command takes "cut" (forget every change not durable), "cut SEED" (keep
// each with probability 1/2, drawn from SEED), "ignore-sync SUFFIX" and
// "stats"; the answer is "ok STATS-JSON" or "error MESSAGE". A cut dumps
// the durable files for the checker.
func (s *fsServer) Command(line string) string {
	f := strings.Fields(line)
	switch {
	case len(f) >= 1 && f[0] == "cut":
		var rng *rand.Rand
		if len(f) == 2 {
			seed, _ := strconv.ParseUint(f[1], 10, 64)
			rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		}
		if err := s.fs.Cut(rng); err != nil {
			return "error " + err.Error()
		}
		if err := s.fs.Dump(s.dump); err != nil {
			return "error " + err.Error()
		}
	case len(f) == 2 && f[0] == "ignore-sync":
		s.fs.IgnoreSyncs(f[1])
	case len(f) == 1 && f[0] == "stats":
	default:
		return "error unknown command " + line
	}
	b, _ := json.Marshal(s.fs.Stats())
	return "ok " + string(b)
}

// TestPowerCutFSHelper is not a test: it is the body of the power-cut file
// system's server process (see fuseproc.Serve).
func TestPowerCutFSHelper(t *testing.T) {
	fuseproc.Serve(t, func(dump string) (fuseproc.FS, error) { return &fsServer{fs: New(), dump: dump}, nil })
}

// harness runs the queue on a power-cut file system, cut after cut, and
// remembers every acknowledgement that must survive.
type harness struct {
	t          *testing.T
	m          *fuseproc.Mount
	dump, path string
	durability string
	pragmas    string
	rng        *rand.Rand

	enq  map[int64]ack // acknowledged enqueues (E, T) not lost
	done map[int64]ack // acknowledged completions not lost

	cuts, cutsBeforeOpen         int
	acked, completed             int // acknowledgements read
	lost, lostMax, lostCompleted int // acknowledged commits a cut took (DurabilityProcess)
	protected                    int // acknowledgements checked as before the WAL's last sync (DurabilityProcess)
	stats                        Stats
	spent                        [3]time.Duration // running the processes, cutting, checking
}

func newHarness(t *testing.T, durability, pragmas string, seed uint64) *harness {
	dump := memDir(t)
	m := fuseproc.Start(t, "TestPowerCutFSHelper", dump)
	h := &harness{t: t, m: m, dump: dump, path: filepath.Join(m.Dir, "q.db"), durability: durability, pragmas: pragmas,
		rng: rand.New(rand.NewPCG(seed, 1)), enq: map[int64]ack{}, done: map[int64]ack{}}
	// The queue file and the application's tables, made once.
	db, err := sql.Open("sqlite", appDSN(h.path, "full"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := litequeue.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(appSchema); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// memDir returns a new directory in memory (/dev/shm) where there is one,
// else on disk: the checker's copies need no disk syncs.
func memDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "lqpowercut-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// childOut collects a child's output while it runs; opened reports whether
// the child has printed "open" (it opened the queue) so far.
type childOut struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *childOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *childOut) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

func (o *childOut) opened() bool {
	s := o.String()
	return strings.HasPrefix(s, "open\n") || strings.Contains(s, "\nopen\n")
}

// child starts a producer or worker process on the queue file.
func (h *harness) child(role string, out *childOut) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPowerCutChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDB+"="+h.path, envDurability+"="+h.durability, envPragmas+"="+h.pragmas)
	if h.durability == "process" {
		// Under DurabilityProcess the WAL is synced only by checkpoints:
		// frequent ones (every 100 pages, about 30 enqueues) put many
		// acknowledgements before a sync, where they must survive.
		cmd.Env = append(cmd.Env, envCheckpoint+"=100")
	}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	return cmd
}

// maxCutDelay bounds the random moment of a cut after the children start:
// they open the queue in 20-60 ms here (more under the race detector), so
// most cuts fall while they work and some while they open (and recover) the
// file.
func maxCutDelay() time.Duration {
	if raceEnabled {
		return 1500 * time.Millisecond
	}
	return 250 * time.Millisecond
}

// cycle starts a producer and a worker, cuts the power at a random moment,
// and returns what the rebooted file breaks of the guarantees.
func (h *harness) cycle() []string {
	h.t.Helper()
	t0 := time.Now()
	var pout, wout childOut
	producer, worker := h.child("producer", &pout), h.child("worker", &wout)
	// Under the race detector (a few cuts: a smoke run) the children start
	// slowly, and on a loaded machine slower than maxCutDelay: there three
	// cuts in four wait (bounded) until both opened the queue, so that the
	// cuts still meet real work (5 s at most: with the cut's delay, less than
	// the producer's busy timeout). The others, and every cut of the full run,
	// fall wherever the random delay lands, while opening included. (The
	// full run does not wait: children that work longer between cuts make
	// a producer's transaction wait past its 10 s busy timeout for the
	// write lock, which SQLite's busy wait does not hand out fairly.)
	if raceEnabled && h.rng.IntN(4) != 0 {
		for deadline := time.Now().Add(5 * time.Second); !(pout.opened() && wout.opened()) && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond) // a bounded real-time wait for the children
		}
	}
	// A power cut comes at a moment of its own: this wait (bounded by
	// maxCutDelay) is the time the processes work before it.
	time.Sleep(time.Duration(h.rng.Int64N(int64(maxCutDelay()))))
	_ = producer.Process.Kill()
	_ = worker.Process.Kill()
	_ = producer.Wait()
	_ = worker.Wait()
	opened := true
	for _, out := range []*childOut{&pout, &wout} {
		sawOpen := false
		for line := range strings.Lines(out.String()) {
			line = strings.TrimSuffix(line, "\n")
			if line == "open" {
				sawOpen = true
			}
			a, ok, err := parseLine(line)
			if err != nil {
				// A line cut short by the kill has no newline: only the last.
				if strings.HasSuffix(out.String(), line) && !strings.HasPrefix(line, "X ") {
					continue
				}
				h.t.Fatalf("child after %d cuts: %v\n%s", h.cuts, err, out.String())
			}
			if !ok {
				continue
			}
			switch a.kind {
			case 'E', 'T':
				h.enq[a.id] = a
				h.acked++
			case 'C':
				h.done[a.id] = a
				h.completed++
			}
		}
		opened = opened && sawOpen
	}
	if !opened {
		h.cutsBeforeOpen++
	}
	t1 := time.Now()
	cmd := "cut"
	if h.rng.IntN(2) == 0 {
		cmd = fmt.Sprint("cut ", h.rng.Uint64())
	}
	answer := h.m.Command(cmd)
	js, ok := strings.CutPrefix(answer, "ok ")
	if !ok {
		h.t.Fatalf("power-cut file system: %s", answer)
	}
	h.stats = Stats{}
	if err := json.Unmarshal([]byte(js), &h.stats); err != nil {
		h.t.Fatal(err)
	}
	h.cuts++
	t2 := time.Now()
	bad := h.check()
	h.spent[0] += t1.Sub(t0)
	h.spent[1] += t2.Sub(t1)
	h.spent[2] += time.Since(t2)
	return bad
}

// check opens what the cut left (a copy of the durable files) and returns
// every broken guarantee:
//   - the file passes integrity_check and opens as a queue;
//   - no job is both completed (its effect row is there) and still in
//     lq_jobs, and an EnqueueTx job exists exactly when its order row does;
//   - every acknowledged enqueue and completion is there — under
//     DurabilityProcess, every one acknowledged before the WAL was last
//     synced (a checkpoint), and what was lost is a suffix of the commits:
//     no commit after a lost one survived.
func (h *harness) check() []string {
	h.t.Helper()
	var bad []string
	path := filepath.Join(h.dump, "q.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		h.t.Fatal(err)
	}
	defer db.Close()
	var integrity string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		return append(bad, fmt.Sprintf("integrity_check: %q %v", integrity, err))
	}
	jobs := map[int64]string{}
	query(h.t, db, "SELECT id, kind FROM lq_jobs", func(id int64, kind string) { jobs[id] = kind })
	type effect struct {
		kind string
		seq  int64
	}
	effects := map[int64]effect{}
	query(h.t, db, "SELECT job_id, kind, seq FROM pc_effects", func(id int64, kind string, seq int64) { effects[id] = effect{kind, seq} })
	orders := map[int64]bool{}
	query(h.t, db, "SELECT job_id FROM pc_orders", func(id int64) { orders[id] = true })

	for id, e := range effects {
		if _, ok := jobs[id]; ok {
			bad = append(bad, fmt.Sprintf("job %d is completed (its effect is written) and still in lq_jobs", id))
		}
		if e.kind == "pc_tx" && !orders[id] {
			bad = append(bad, fmt.Sprintf("EnqueueTx job %d completed without its order row", id))
		}
	}
	for id, kind := range jobs {
		if kind == "pc_tx" && !orders[id] {
			bad = append(bad, fmt.Sprintf("EnqueueTx job %d exists without its order row", id))
		}
	}
	for id := range orders {
		_, isJob := jobs[id]
		_, isDone := effects[id]
		if !isJob && !isDone {
			bad = append(bad, fmt.Sprintf("order row of job %d without its job", id))
		}
	}

	// What must have survived: everything acknowledged (DurabilityFull),
	// or what was acknowledged before the WAL's last sync.
	bound := int64(math.MaxInt64)
	if h.durability == "process" {
		bound = h.stats.LastSync["q.db-wal"]
	}
	var lostEnq, lostDone []int64
	if h.durability == "process" {
		for _, a := range h.enq {
			if a.at < bound {
				h.protected++
			}
		}
		for _, a := range h.done {
			if a.at < bound {
				h.protected++
			}
		}
	}
	for id, a := range h.enq {
		_, isJob := jobs[id]
		_, isDone := effects[id]
		if !isJob && !isDone {
			lostEnq = append(lostEnq, id)
			if a.at < bound {
				bad = append(bad, fmt.Sprintf("acknowledged job %d (%c) lost", id, a.kind))
			}
		}
	}
	for id, a := range h.done {
		if _, ok := effects[id]; !ok {
			lostDone = append(lostDone, id)
			if a.at < bound {
				bad = append(bad, fmt.Sprintf("acknowledged completion of job %d lost", id))
			}
		}
	}
	// Ids are allocated in commit order (the write lock is held from the
	// insert to the commit), and seq orders a completion among them: what
	// survives must be a prefix of the commits.
	if len(lostEnq) > 0 {
		first := slices.Min(lostEnq)
		for id := range jobs {
			if id > first {
				bad = append(bad, fmt.Sprintf("job %d survived although job %d, committed before it, was lost", id, first))
				break
			}
		}
		for id, e := range effects {
			if e.seq >= first {
				bad = append(bad, fmt.Sprintf("the completion of job %d (after job %d's enqueue) survived, job %d was lost", id, e.seq, first))
				break
			}
		}
	}
	if len(bad) > 0 {
		return bad
	}
	// Lost acknowledgements allowed by the durability are forgotten: their
	// ids may be allocated again.
	for _, id := range lostEnq {
		delete(h.enq, id)
	}
	for _, id := range lostDone {
		delete(h.done, id)
	}
	h.lost += len(lostEnq)
	h.lostCompleted += len(lostDone)
	h.lostMax = max(h.lostMax, len(lostEnq)+len(lostDone))
	if err := db.Close(); err != nil {
		h.t.Fatal(err)
	}

	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		return append(bad, fmt.Sprintf("the rebooted file does not open as a queue: %v", err))
	}
	if _, err := q.Stats(context.Background()); err != nil {
		bad = append(bad, fmt.Sprintf("Stats on the rebooted file: %v", err))
	}
	if err := q.Close(); err != nil {
		bad = append(bad, fmt.Sprintf("Close on the rebooted file: %v", err))
	}
	return bad
}

// query runs q and calls fn with each row's columns (int64 or string).
func query[F func(int64) | func(int64, string) | func(int64, string, int64)](t *testing.T, db *sql.DB, q string, fn F) {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		var a, c int64
		var b string
		var err error
		switch f := any(fn).(type) {
		case func(int64):
			err = rows.Scan(&a)
			f(a)
		case func(int64, string):
			err = rows.Scan(&a, &b)
			f(a, b)
		case func(int64, string, int64):
			err = rows.Scan(&a, &b, &c)
			f(a, b, c)
		}
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// cutsFor is how many cuts a durability gets: LITEQUEUE_POWERCUT_CUTS, or
// def (a thirtieth of it under the race detector, whose children are slow:
// CI runs the full count in a step of its own, without it).
func cutsFor(t *testing.T, def int) int {
	if s := os.Getenv("LITEQUEUE_POWERCUT_CUTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LITEQUEUE_POWERCUT_CUTS=%q: want a positive number", s)
		}
		return n
	}
	if raceEnabled {
		return max(def/30, 5)
	}
	return def
}

// seed is LITEQUEUE_POWERCUT_SEED, or a new one (logged, to replay a run).
func seed(t *testing.T) uint64 {
	if s := os.Getenv("LITEQUEUE_POWERCUT_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LITEQUEUE_POWERCUT_SEED=%q: %v", s, err)
		}
		return n
	}
	n := rand.Uint64()
	t.Logf("LITEQUEUE_POWERCUT_SEED=%d", n)
	return n
}

// TestPowerCutLosesNothingAcknowledged cuts the power under a producer
// (Enqueue, EnqueueTx) and a worker (CompleteTx) process at random moments,
// hundreds of times, and checks the rebooted file after each cut (see
// harness.check). DurabilityFull loses nothing acknowledged;
// DurabilityProcess loses at most what was committed since the WAL was last
// synced, a suffix of the commits, and never half of one.
func TestPowerCutLosesNothingAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		durability string
		cuts       int
	}{{"full", 300}, {"process", 200}} {
		t.Run(tc.durability, func(t *testing.T) {
			h := newHarness(t, tc.durability, "", seed(t))
			n := cutsFor(t, tc.cuts)
			start := time.Now()
			for i := range n {
				if bad := h.cycle(); len(bad) > 0 {
					t.Fatalf("after cut %d of %d (%s): %d broken guarantees, first: %s", i+1, n, h.summary(), len(bad), strings.Join(bad[:min(len(bad), 10)], "; "))
				}
			}
			t.Logf("%s in %s", h.summary(), time.Since(start).Round(time.Millisecond))
			// The cuts must have met real work, or they prove nothing. Under
			// the race detector (a few cuts, slow children: a smoke run)
			// some enqueues are enough.
			if raceEnabled && h.acked < n || !raceEnabled && (h.acked < 10*n || h.completed < 5*n) {
				t.Fatalf("too little work between cuts: %s", h.summary())
			}
			if tc.durability == "full" && h.lost+h.lostCompleted != 0 {
				t.Fatalf("DurabilityFull lost acknowledged commits: %s", h.summary())
			}
		})
	}
}

func (h *harness) summary() string {
	return fmt.Sprintf("%d cuts (%d before both processes opened the queue), %d enqueues and %d completions acknowledged, %d enqueues and %d completions lost as the durability allows (at most %d at one cut), %d checks of an acknowledgement made before the WAL's last sync; file system: %d writes, %d fsyncs, %d directory fsyncs; cuts forgot %d writes and %d directory changes; time running the processes %s, cutting %s, checking %s",
		h.cuts, h.cutsBeforeOpen, h.acked, h.completed, h.lost, h.lostCompleted, h.lostMax, h.protected,
		h.stats.Writes, h.stats.Syncs, h.stats.DirSyncs, h.stats.LostWrites, h.stats.LostNames,
		h.spent[0].Round(time.Millisecond), h.spent[1].Round(time.Millisecond), h.spent[2].Round(time.Millisecond))
}

// TestPowerCutCatchesAMissingSync runs the same cuts with one sync of the
// commit path taken away — the file system ignoring the WAL's fsyncs, or
// the producer's connections on synchronous=OFF (Options.Pragmas) — and
// requires the check to find an acknowledged job lost: the harness can
// see what it is there to see.
func TestPowerCutCatchesAMissingSync(t *testing.T) {
	for _, tc := range []struct{ name, ignore, pragmas string }{
		{"wal-fsync-ignored", "-wal", ""},
		{"synchronous-off", "", "synchronous(OFF)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "full", tc.pragmas, seed(t))
			if tc.ignore != "" {
				if a := h.m.Command("ignore-sync " + tc.ignore); !strings.HasPrefix(a, "ok ") {
					t.Fatal(a)
				}
			}
			for i := range 40 {
				// Without the sync a cut loses acknowledged jobs (with
				// synchronous=OFF it may also damage the file).
				if bad := h.cycle(); len(bad) > 0 {
					t.Logf("cut %d found it: %d broken guarantees, first: %s", i+1, len(bad), strings.Join(bad[:min(len(bad), 3)], "; "))
					return
				}
			}
			t.Fatalf("40 cuts without the sync lost nothing acknowledged: the harness cannot see a missing sync (%s)", h.summary())
		})
	}
}
