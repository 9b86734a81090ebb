package litequeue

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests in this file and in crash_test.go run the queue in other
// processes: they re-execute this test binary with helperEnv set, which
// makes TestHelperProcess run one role and exit. Those processes use the
// real clock (processes cannot share a mock one), so the parent waits for
// them in real time, always bounded by a deadline.

const helperEnv = "LITEQUEUE_TEST_HELPER"

// procWait bounds every real-time wait for a helper process.
var procWait = flag.Duration("lq.procwait", 3*time.Minute, "bound on each wait for a litequeue helper process")

// Job types run by helper processes, all in queue "proc".

type ProcJob struct {
	N   int    `json:"n"`
	Pad string `json:"pad,omitempty"`
}

func (ProcJob) Kind() string      { return "proc_job" }
func (ProcJob) QueueName() string { return "proc" }

// ProcOnce may run once: a crash during its only attempt makes it a dead
// letter.
type ProcOnce struct {
	N int `json:"n"`
}

func (ProcOnce) Kind() string      { return "proc_once" }
func (ProcOnce) QueueName() string { return "proc" }
func (ProcOnce) RetryPolicy() *RetryPolicy {
	p := NoRetry()
	return &p
}

type ProcAlpha struct {
	N int `json:"n"`
}

func (ProcAlpha) Kind() string      { return "proc_alpha" }
func (ProcAlpha) QueueName() string { return "proc" }

type ProcBeta struct {
	N int `json:"n"`
}

func (ProcBeta) Kind() string      { return "proc_beta" }
func (ProcBeta) QueueName() string { return "proc" }

// BatchJob is what the batch producer enqueues: batch B of process P.
type BatchJob struct {
	P   int    `json:"p"`
	B   int    `json:"b"`
	I   int    `json:"i"`
	Pad string `json:"pad"`
}

func (BatchJob) Kind() string      { return "batch_job" }
func (BatchJob) QueueName() string { return "batches" }

// helperConfig is what a helper process reads from its environment.
type helperConfig struct {
	Path        string        // queue file
	Log         string        // side file of records
	Kinds       []string      // kinds to register
	Concurrency int           // handlers of queue "proc"
	Visibility  time.Duration // lease
	ClaimBatch  int
	Attempts    int           // retry policy of queue "proc"
	Fsync       bool          // fsync each completion record
	Produce     int           // jobs the worker also enqueues while it runs
	Drain       bool          // stop once nothing is live, instead of at stdin EOF
	Jobs        int           // producer roles: how many jobs
	Batch       int           // producer roles: jobs per batch
	Heartbeat   time.Duration // Options.HeartbeatInterval (0: the default)
}

func (c helperConfig) env(role string) []string {
	return append(os.Environ(),
		helperEnv+"="+role,
		"LQ_PATH="+c.Path, "LQ_LOG="+c.Log, "LQ_KINDS="+strings.Join(c.Kinds, ","),
		"LQ_CONC="+strconv.Itoa(c.Concurrency), "LQ_VIS="+c.Visibility.String(),
		"LQ_CLAIM="+strconv.Itoa(c.ClaimBatch), "LQ_ATTEMPTS="+strconv.Itoa(c.Attempts),
		"LQ_FSYNC="+strconv.FormatBool(c.Fsync), "LQ_PRODUCE="+strconv.Itoa(c.Produce),
		"LQ_DRAIN="+strconv.FormatBool(c.Drain), "LQ_JOBS="+strconv.Itoa(c.Jobs), "LQ_BATCH="+strconv.Itoa(c.Batch),
		"LQ_BEAT="+c.Heartbeat.String(),
	)
}

func helperConfigFromEnv() helperConfig {
	atoi := func(k string) int { n, _ := strconv.Atoi(os.Getenv(k)); return n }
	vis, _ := time.ParseDuration(os.Getenv("LQ_VIS"))
	beat, _ := time.ParseDuration(os.Getenv("LQ_BEAT"))
	return helperConfig{
		Path: os.Getenv("LQ_PATH"), Log: os.Getenv("LQ_LOG"), Kinds: strings.Split(os.Getenv("LQ_KINDS"), ","),
		Concurrency: atoi("LQ_CONC"), Visibility: vis, ClaimBatch: atoi("LQ_CLAIM"), Attempts: atoi("LQ_ATTEMPTS"),
		Fsync: os.Getenv("LQ_FSYNC") == "true", Produce: atoi("LQ_PRODUCE"), Drain: os.Getenv("LQ_DRAIN") == "true",
		Jobs: atoi("LQ_JOBS"), Batch: atoi("LQ_BATCH"), Heartbeat: beat,
	}
}

// TestHelperProcess is not a test: it is the body of a helper process.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		t.Skip("runs only as a helper process of the multi-process and crash tests")
	}
	cfg := helperConfigFromEnv()
	var err error
	switch role {
	case "worker":
		err = helperWorker(cfg)
	case "producer":
		err = helperProducer(cfg)
	case "control":
		err = helperControl(cfg) // multiprocess_control_test.go
	case "flow":
		err = helperFlow(cfg) // flow_multiprocess_test.go
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper failed:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// sideLog is an append-only file of one-line records ("C id attempt pid
// kind"), written with one write call each so that a kill never tears a
// line.
type sideLog struct {
	f     *os.File
	fsync bool
	pid   int
}

func openSideLog(path string, fsync bool) (*sideLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	return &sideLog{f: f, fsync: fsync, pid: os.Getpid()}, err
}

func (l *sideLog) record(op string, id int64, attempt int, kind string, sync bool) error {
	if _, err := fmt.Fprintf(l.f, "%s %d %d %d %s\n", op, id, attempt, l.pid, kind); err != nil {
		return err
	}
	if sync && l.fsync {
		return l.f.Sync()
	}
	return nil
}

// recordingHandler records S when an attempt starts and C when it is about
// to succeed, and checks that the queue's reads work from inside a handler.
func recordingHandler[J Job](q *Queue, l *sideLog, fail func(error)) func(ctx context.Context, d *Delivery[J]) error {
	return func(ctx context.Context, d *Delivery[J]) error {
		if err := l.record("S", d.ID, d.Attempt, d.Kind, false); err != nil {
			fail(err)
			return err
		}
		if _, err := q.Job(ctx, d.ID); err != nil {
			fail(fmt.Errorf("handler read of job %d: %w", d.ID, err))
			return err
		}
		if err := l.record("C", d.ID, d.Attempt, d.Kind, true); err != nil {
			fail(err)
			return err
		}
		return nil
	}
}

// errorLogHandler turns every Error record of the queue's log into a
// helper failure: in these tests no claim, completion or failure write may
// fail (a busy database must be absorbed inside the store).
type errorLogHandler struct{ fail func(error) }

func (h errorLogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h errorLogHandler) Handle(_ context.Context, r slog.Record) error {
	isEvent := false // a job's own outcome (a dead letter), not a failure of the queue
	r.Attrs(func(a slog.Attr) bool { isEvent = isEvent || a.Key == LogOutcome; return !isEvent })
	if isEvent {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.fail(errors.New(b.String()))
	return nil
}
func (h errorLogHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h errorLogHandler) WithGroup(string) slog.Handler      { return h }

// helperFailures collects failures inside a helper; any makes it exit 3.
type helperFailures struct {
	mu   sync.Mutex
	errs []error
}

func (f *helperFailures) add(err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
	fmt.Fprintln(os.Stderr, "FAILURE:", err)
}

func (f *helperFailures) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

func helperOptions(cfg helperConfig, fails *helperFailures) *Options {
	return &Options{
		PollInterval:      5 * time.Millisecond,
		ClaimBatch:        cfg.ClaimBatch,
		HeartbeatInterval: cfg.Heartbeat,
		Logger:            slog.New(errorLogHandler{fail: fails.add}),
		Queues: []QueueConfig{{
			Name: "proc", Retry: NewRetryPolicy(max(cfg.Attempts, 1), NoBackoff()),
			Concurrency: cfg.Concurrency, VisibilityTimeout: cfg.Visibility,
		}},
	}
}

func helperWorker(cfg helperConfig) error {
	fails := &helperFailures{}
	q, err := Open(cfg.Path, helperOptions(cfg, fails))
	if err != nil {
		return err
	}
	l, err := openSideLog(cfg.Log, cfg.Fsync)
	if err != nil {
		return err
	}
	for _, k := range cfg.Kinds {
		switch k {
		case ProcJob{}.Kind():
			Register(q, recordingHandler[ProcJob](q, l, fails.add))
		case ProcOnce{}.Kind():
			Register(q, recordingHandler[ProcOnce](q, l, fails.add))
		case ProcAlpha{}.Kind():
			Register(q, recordingHandler[ProcAlpha](q, l, fails.add))
		case ProcBeta{}.Kind():
			Register(q, recordingHandler[ProcBeta](q, l, fails.add))
		default:
			return fmt.Errorf("unknown kind %q", k)
		}
	}
	if err := q.Start(context.Background()); err != nil {
		return err
	}
	fmt.Println("ready")
	var produced sync.WaitGroup
	if cfg.Produce > 0 {
		produced.Go(func() {
			// Jobs enqueued here are recorded (fsynced) only after Enqueue
			// returned nil: every recorded one must survive a kill.
			for i := range cfg.Produce {
				id, err := q.Enqueue(context.Background(), ProcJob{N: -i}, nil)
				if err != nil {
					fails.add(fmt.Errorf("enqueue: %w", err))
					return
				}
				if err := l.record("E", id, 0, ProcJob{}.Kind(), true); err != nil {
					fails.add(err)
					return
				}
			}
		})
	}
	if cfg.Drain {
		err = waitUntilDrained(q)
	} else {
		_, err = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
	}
	produced.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return errors.Join(err, q.Stop(ctx), q.Close(), fails.err())
}

// waitUntilDrained polls (a real-time wait: other processes' leases lapse
// in real time) until no job is ready, scheduled or running, for at most a
// minute.
func waitUntilDrained(q *Queue) error {
	err := poll(time.Minute, 10*time.Millisecond, func() (bool, error) {
		stats, err := q.Stats(context.Background())
		if err != nil {
			return false, err
		}
		live := 0
		for _, s := range stats {
			live += s.Ready + s.Scheduled + s.Running
		}
		return live == 0, nil
	})
	if errors.Is(err, errPollTimeout) {
		return fmt.Errorf("queue not drained: %w", err)
	}
	return err
}

// helperProducer enqueues cfg.Jobs jobs: with cfg.Batch > 1 as batches of
// BatchJob (recording "B pid batch" after each committed batch), otherwise
// ProcJob one at a time and in batches of 20 alternately (recording "E id").
func helperProducer(cfg helperConfig) error {
	fails := &helperFailures{}
	q, err := Open(cfg.Path, helperOptions(cfg, fails))
	if err != nil {
		return err
	}
	defer q.Close()
	l, err := openSideLog(cfg.Log, cfg.Fsync)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	ctx := context.Background()
	pad := strings.Repeat("x", 300)
	if cfg.Batch > 1 {
		for b := 0; cfg.Jobs <= 0 || b*cfg.Batch < cfg.Jobs; b++ {
			items := make([]BatchItem, cfg.Batch)
			for i := range items {
				items[i] = BatchItem{Job: BatchJob{P: l.pid, B: b, I: i, Pad: pad}}
			}
			if _, err := q.EnqueueBatch(ctx, items); err != nil {
				return fmt.Errorf("batch %d: %w", b, err)
			}
			if err := l.record("B", int64(b), cfg.Batch, BatchJob{}.Kind(), true); err != nil {
				return err
			}
		}
		return fails.err()
	}
	for n := 0; n < cfg.Jobs; {
		if n%40 < 20 {
			id, err := q.Enqueue(ctx, ProcJob{N: 1_000_000 + n}, nil)
			if err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			if err := l.record("E", id, 0, ProcJob{}.Kind(), true); err != nil {
				return err
			}
			n++
			continue
		}
		items := make([]BatchItem, 20)
		for i := range items {
			items[i] = BatchItem{Job: ProcJob{N: 1_000_000 + n + i}}
		}
		ids, err := q.EnqueueBatch(ctx, items)
		if err != nil {
			return fmt.Errorf("enqueue batch: %w", err)
		}
		for _, id := range ids {
			if err := l.record("E", id, 0, ProcJob{}.Kind(), true); err != nil {
				return err
			}
		}
		n += len(items)
	}
	return fails.err()
}

// proc is a running helper process.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *readyWriter
	errBuf *lockedBuffer
	done   chan struct{} // closed when the process has been waited for
	err    error         // Wait's result, once done
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// readyWriter is a process's stdout; ready is closed when it prints "ready".
type readyWriter struct {
	lockedBuffer
	ready chan struct{}
	once  sync.Once
}

func (w *readyWriter) Write(p []byte) (int, error) {
	n, err := w.lockedBuffer.Write(p)
	if strings.Contains(w.String(), "ready\n") {
		w.once.Do(func() { close(w.ready) })
	}
	return n, err
}

func startProc(t testing.TB, role string, cfg helperConfig) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = cfg.env(role)
	p := &proc{t: t, cmd: cmd, out: &readyWriter{ready: make(chan struct{})}, errBuf: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.errBuf
	var err error
	p.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// waitReady waits until the process printed "ready" and fails the test if it
// exited first or took longer than procWait.
func (p *proc) waitReady() {
	p.t.Helper()
	select {
	case <-p.out.ready:
	case <-p.done:
		p.t.Fatalf("helper %d exited before it was ready: %v\n%s", p.pid(), p.err, p.errBuf)
	case <-time.After(*procWait):
		p.t.Fatalf("helper %d not ready after %s\n%s", p.pid(), *procWait, p.errBuf)
	}
}

// stop closes the process's stdin (workers stop at EOF) and waits for it to
// exit cleanly.
func (p *proc) stop() {
	p.t.Helper()
	p.stdin.Close()
	p.wait()
}

// wait waits for the process to exit and requires it succeeded.
func (p *proc) wait() {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(*procWait):
		p.t.Fatalf("helper %d still running after %s\n%s", p.pid(), *procWait, p.errBuf)
	}
	require.NoError(p.t, p.err, "helper %d failed:\n%s", p.pid(), p.errBuf)
}

// kill SIGKILLs the process and waits for it. It reports false if the
// process had already exited on its own (which fails the test unless it
// exited cleanly).
func (p *proc) kill() bool {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	require.NoError(p.t, p.err, "helper %d failed before it was killed:\n%s", p.pid(), p.errBuf)
	return false
}

// record is one line of a side file.
type record struct {
	op      string
	id      int64
	attempt int
	pid     int
	kind    string
}

func readSideLog(t testing.TB, path string) []record {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []record
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r record
		_, err := fmt.Sscanf(sc.Text(), "%s %d %d %d %s", &r.op, &r.id, &r.attempt, &r.pid, &r.kind)
		require.NoError(t, err, "side file line %q", sc.Text())
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

// seedQueue enqueues jobs into a new queue file at path, in batches.
func seedQueue(t testing.TB, path string, jobs []Job) []int64 {
	t.Helper()
	q, err := Open(path, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close()) }()
	var ids []int64
	for len(jobs) > 0 {
		n := min(len(jobs), 500)
		items := make([]BatchItem, n)
		for i := range items {
			items[i] = BatchItem{Job: jobs[i]}
		}
		got, err := q.EnqueueBatch(context.Background(), items)
		require.NoError(t, err)
		ids = append(ids, got...)
		jobs = jobs[n:]
	}
	return ids
}

// liveCount is how many jobs of the file are ready, scheduled or running.
func liveCount(t testing.TB, path string) int {
	t.Helper()
	q, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer q.Close()
	var n int
	require.NoError(t, q.lite.DB().QueryRow(`SELECT count(*) FROM lq_jobs WHERE state IN (0, 1)`).Scan(&n))
	return n
}

func TestThreeProcessesRunEveryJobExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := helperConfig{
		Path: filepath.Join(dir, "q.db"), Log: filepath.Join(dir, "side.log"),
		Kinds: []string{ProcJob{}.Kind()}, Concurrency: 4, Visibility: time.Minute, Attempts: 1,
	}
	seeded, produced := underRace(7000, 2100), underRace(3000, 900)
	jobs := make([]Job, seeded)
	for i := range jobs {
		jobs[i] = ProcJob{N: i}
	}
	want := map[int64]bool{}
	for _, id := range seedQueue(t, cfg.Path, jobs) {
		want[id] = true
	}
	start := time.Now()
	var workers []*proc
	for range 3 {
		workers = append(workers, startProc(t, "worker", cfg))
	}
	for _, w := range workers {
		w.waitReady()
	}
	pcfg := cfg
	pcfg.Jobs = produced
	producer := startProc(t, "producer", pcfg)
	producer.wait()
	// Wait in real time for the workers to finish: they are other processes.
	waitWithin(t, *procWait, 50*time.Millisecond, "no job is live", func() bool { return liveCount(t, cfg.Path) == 0 })
	for _, w := range workers {
		w.stop()
	}
	t.Logf("3 processes × 4 workers ran %d jobs in %s", seeded+produced, time.Since(start).Round(time.Millisecond))

	recs := readSideLog(t, cfg.Log)
	byPid := map[int]int{}
	completed := map[int64]int{}
	for _, r := range recs {
		switch r.op {
		case "E":
			require.False(t, want[r.id], "id %d enqueued twice", r.id)
			want[r.id] = true
		case "C":
			completed[r.id]++
			byPid[r.pid]++
		}
	}
	require.Len(t, want, seeded+produced)
	for id := range want {
		require.Equal(t, 1, completed[id], "job %d completed %d times", id, completed[id])
	}
	require.Len(t, completed, len(want), "a job completed that was never enqueued")
	require.Len(t, byPid, 3, "every worker process took part: %v", byPid)
	t.Logf("completions per process: %v", byPid)
	checkInvariants(t, cfg.Path)
	require.Zero(t, liveCount(t, cfg.Path))
	requireNoDeadLetters(t, cfg.Path)
}

func requireNoDeadLetters(t *testing.T, path string) {
	t.Helper()
	q, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer q.Close()
	dead, err := q.DeadLetters(context.Background(), JobFilter{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, dead)
}

func TestProcessesWithDifferentKindsRunOnlyTheirOwn(t *testing.T) {
	dir := t.TempDir()
	base := helperConfig{
		Path: filepath.Join(dir, "q.db"), Log: filepath.Join(dir, "side.log"),
		Concurrency: 4, Visibility: time.Minute, Attempts: 1,
	}
	const each = 500
	var jobs []Job
	for i := range each {
		jobs = append(jobs, ProcAlpha{N: i}, ProcBeta{N: i})
	}
	ids := seedQueue(t, base.Path, jobs)
	alphaCfg, betaCfg := base, base
	alphaCfg.Kinds = []string{ProcAlpha{}.Kind()}
	betaCfg.Kinds = []string{ProcBeta{}.Kind()}
	alpha := startProc(t, "worker", alphaCfg)
	beta := startProc(t, "worker", betaCfg)
	alpha.waitReady()
	beta.waitReady()
	// Other processes: a real-time wait.
	waitWithin(t, *procWait, 50*time.Millisecond, "no job is live", func() bool { return liveCount(t, base.Path) == 0 })
	alpha.stop()
	beta.stop()
	kindOf := map[int]string{alpha.pid(): ProcAlpha{}.Kind(), beta.pid(): ProcBeta{}.Kind()}
	completed := map[int64]int{}
	for _, r := range readSideLog(t, base.Log) {
		require.Equal(t, kindOf[r.pid], r.kind, "process %d ran a job of another kind", r.pid)
		if r.op == "C" {
			completed[r.id]++
		}
	}
	for _, id := range ids {
		require.Equal(t, 1, completed[id], "job %d", id)
	}
	requireNoDeadLetters(t, base.Path)
	checkInvariants(t, base.Path)
}
