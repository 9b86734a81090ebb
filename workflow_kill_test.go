package litequeue_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

// The kill test of workflows: worker processes are killed (SIGKILL) at
// random moments while many small workflows run on one database; at the
// end every node succeeded, none started before all its parents had
// succeeded (each start reads its parents' recorded outcomes and outputs),
// none is stuck waiting and none is lost.
//
// LITEQUEUE_WF_KILLS (default 300) sets how many kills, and
// LITEQUEUE_WF_WORKFLOWS (default 300) how many workflows of 20 nodes; the
// defaults run in well under a minute per backend.

// WfNode is the kill test's job: node N of workflow W.
type WfNode struct {
	W int `json:"w"`
	N int `json:"n"`
}

func (WfNode) Kind() string { return "wf_node" }

const wfHelperEnv = "LITEQUEUE_WF_HELPER"

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// openWf opens the queue of a kill test: a SQLite file path, or a
// PostgreSQL URL.
func openWf(addr string, opts *litequeue.Options) (*litequeue.Queue, error) {
	if strings.HasPrefix(addr, "postgres") {
		return postgres.Open(context.Background(), addr, opts)
	}
	return litequeue.Open(addr, opts)
}

func wfOptions() *litequeue.Options {
	return &litequeue.Options{
		PollInterval:       10 * time.Millisecond,
		CompletedRetention: time.Hour, // every node's success stays countable
		Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Concurrency: 4,
			VisibilityTimeout: 300 * time.Millisecond,
			Retry:             litequeue.RetryPolicy{MaxAttempts: 1000, Backoff: litequeue.FixedBackoff(time.Millisecond)}}},
	}
}

// TestWorkflowKillHelper is the worker process of the kill tests; it does
// nothing unless started by one.
func TestWorkflowKillHelper(t *testing.T) {
	addr := os.Getenv(wfHelperEnv)
	if addr == "" {
		t.Skip("run by the workflow kill tests")
	}
	logf, err := os.OpenFile(os.Getenv("LITEQUEUE_WF_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	q, err := openWf(addr, wfOptions())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[WfNode]) error {
		ps, err := d.ParentResults(ctx)
		if err != nil {
			return err
		}
		// One write per line (O_APPEND): a kill leaves whole lines.
		for _, p := range ps {
			var out WfNode
			if !p.Succeeded {
				fmt.Fprintf(logf, "VIOLATION job %d started while its parent %d had not succeeded\n", d.ID, p.ID)
				continue
			}
			// A read that fails (the lease lapsed under load, and the
			// context with it) fails the attempt; a wrong answer is a
			// violation.
			if err := d.ParentOutput(ctx, p.ID, &out); err != nil {
				if ctx.Err() != nil {
					return err
				}
				// A lease that lapsed under load (300 ms here) lets another
				// process run the job meanwhile; its success deletes the
				// job's edges under this read. That is the at-least-once
				// delivery, not a violation: the job completed once.
				if info, jerr := q.Job(ctx, d.ID); jerr == nil && info.State == litequeue.StateCompleted {
					return err
				}
				fmt.Fprintf(logf, "VIOLATION job %d could not read the output of parent %d: %v\n", d.ID, p.ID, err)
			} else if out.W != d.Job.W {
				fmt.Fprintf(logf, "VIOLATION job %d read the output %+v of parent %d\n", d.ID, out, p.ID)
			}
		}
		fmt.Fprintf(logf, "start %d %d %d\n", d.ID, len(ps), os.Getpid())
		time.Sleep(time.Duration(rng.IntN(20000)) * time.Microsecond) // real work takes time (the kills must land while work runs); a kill may land here
		return d.SetOutput(d.Job)
	})
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {} // until killed
}

// wfBuild makes workflow w: 20 nodes, each after 0 to 3 random earlier
// nodes, and a last node after every node without children.
func wfBuild(rng *rand.Rand, w int) *litequeue.Workflow {
	var wf litequeue.Workflow
	nodes := make([]litequeue.Node, 0, 20)
	hasChild := map[litequeue.Node]bool{}
	for n := range 19 {
		node := wf.Add(WfNode{W: w, N: n}, nil)
		if n > 0 {
			picked := map[litequeue.Node]bool{}
			for range rng.IntN(4) {
				p := nodes[rng.IntN(len(nodes))]
				if !picked[p] {
					picked[p] = true
					wf.Needs(node, p)
					hasChild[p] = true
				}
			}
		}
		nodes = append(nodes, node)
	}
	last := wf.Add(WfNode{W: w, N: 19}, nil)
	for _, n := range nodes {
		if !hasChild[n] {
			wf.Needs(last, n)
		}
	}
	return &wf
}

func runWorkflowKills(t *testing.T, addr string) {
	kills := envInt("LITEQUEUE_WF_KILLS", 300)
	workflows := envInt("LITEQUEUE_WF_WORKFLOWS", 300)
	rng := rand.New(rand.NewPCG(35, uint64(time.Now().UnixNano())))
	ctx := context.Background()
	q, err := openWf(addr, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	total := 0
	for w := range workflows {
		ids, err := q.EnqueueWorkflow(ctx, wfBuild(rng, w))
		require.NoError(t, err)
		total += len(ids)
	}

	logPath := filepath.Join(t.TempDir(), "starts.log")
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWorkflowKillHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), wfHelperEnv+"="+addr, "LITEQUEUE_WF_LOG="+logPath)
		require.NoError(t, cmd.Start())
		return cmd
	}
	procs := []*exec.Cmd{start(), start(), start()}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGKILL)
			_, _ = p.Process.Wait()
		}
	}()
	began := time.Now()
	// Each kill lands on a process that has started work: it waits (bounded)
	// until the process's first start line, then a random moment more. A
	// process killed before it claimed anything (a race-built child takes
	// longer to start than the pause between kills) proves nothing.
	tail := &startTail{path: logPath, pids: map[int]bool{}}
	for k := range kills {
		i := k % len(procs)
		for deadline := time.Now().Add(10 * time.Second); !tail.started(procs[i].Process.Pid) && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond) // a bounded real-time wait for the process's first start
		}
		// A bounded real-time wait: the workers run in real time, and the
		// kill must land at a random moment of their work.
		time.Sleep(time.Duration(5+rng.IntN(60)) * time.Millisecond)
		require.NoError(t, procs[i].Process.Signal(syscall.SIGKILL))
		_, _ = procs[i].Process.Wait()
		procs[i] = start()
	}
	mid, err := q.Stats(ctx)
	require.NoError(t, err)
	done := 0
	for _, s := range mid {
		done += s.Completed
	}
	t.Logf("%d kills in %s; %d of %d nodes completed by then", kills, time.Since(began).Round(time.Millisecond), done, total)

	// The survivors finish the work: every node completed, nothing waits.
	deadline := time.Now().Add(2 * time.Minute)
	var st litequeue.QueueStats
	for {
		stats, err := q.Stats(ctx)
		require.NoError(t, err)
		st = litequeue.QueueStats{}
		for _, s := range stats {
			st.Completed += s.Completed
			st.Waiting += s.Waiting
			st.Dead += s.Dead
			st.Cancelled += s.Cancelled
			st.Ready += s.Ready + s.Scheduled + s.Running
		}
		if st.Completed == total || st.Dead+st.Cancelled > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // a bounded poll of a database other processes write
	}
	require.Zero(t, st.Dead, "dead nodes")
	require.Zero(t, st.Cancelled, "cancelled nodes")
	require.Equal(t, total, st.Completed, "every node completed (stuck: %d waiting, %d live)", st.Waiting, st.Ready)

	f, err := os.Open(logPath)
	require.NoError(t, err)
	defer f.Close()
	starts := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		require.False(t, strings.HasPrefix(line, "VIOLATION"), line)
		if strings.HasPrefix(line, "start ") {
			starts++
		}
	}
	require.NoError(t, sc.Err())
	require.GreaterOrEqual(t, starts, total)
	t.Logf("%d workflows, %d nodes, %d starts (%d repeated after kills)", workflows, total, starts, starts-total)
}

// startTail reads the kill test's log as it grows and keeps the pids that
// have written a start line.
type startTail struct {
	path string
	off  int64
	part string
	pids map[int]bool
}

// started reports whether process pid has logged a start so far.
func (s *startTail) started(pid int) bool {
	if s.pids[pid] {
		return true
	}
	f, err := os.Open(s.path)
	if err != nil {
		return false // no start logged yet
	}
	defer f.Close()
	if _, err := f.Seek(s.off, 0); err != nil {
		return false
	}
	b, _ := io.ReadAll(f)
	s.off += int64(len(b))
	text := s.part + string(b)
	lines := strings.Split(text, "\n")
	s.part = lines[len(lines)-1] // a line still being written
	for _, line := range lines[:len(lines)-1] {
		var id, n, p int
		if _, err := fmt.Sscanf(line, "start %d %d %d", &id, &n, &p); err == nil {
			s.pids[p] = true
		}
	}
	return s.pids[pid]
}

func TestWorkflowKillsSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("kills worker processes for tens of seconds")
	}
	runWorkflowKills(t, filepath.Join(t.TempDir(), "queue.db"))
}

func TestWorkflowKillsPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("kills worker processes for tens of seconds")
	}
	u, _ := pgtest.FreshSchema(t)
	runWorkflowKills(t, u)
}
