package litequeue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The exactness of flow control across processes: three worker processes
// on one queue file run jobs of three limited queues — a global limit with
// a per-group limit, ordered groups, a rate — while the test kills one of
// them; the handlers record when each attempt started and ended (real
// time: processes share no mock clock), and the records must show the
// limits held at every moment.

// Limits of the exactness test.
var (
	flowConcLimits = QueueLimits{Concurrency: 6, KeyConcurrency: 2}
	flowOrdLimits  = QueueLimits{Ordered: true}
	flowRateLimits = QueueLimits{Rate: Rate{N: 40, Per: 20 * time.Millisecond}}
)

// FlowConc, FlowOrd and FlowRate are the jobs of the three queues.
type FlowConc struct {
	G string `json:"g"`
}

func (FlowConc) Kind() string      { return "flow_conc" }
func (FlowConc) QueueName() string { return "flowc" }
func (j FlowConc) Group() string   { return j.G }

type FlowOrd struct {
	G string `json:"g"`
}

func (FlowOrd) Kind() string      { return "flow_ord" }
func (FlowOrd) QueueName() string { return "flowo" }
func (j FlowOrd) Group() string   { return j.G }

type FlowRate struct{}

func (FlowRate) Kind() string      { return "flow_rate" }
func (FlowRate) QueueName() string { return "flowr" }

func flowOptions(cfg helperConfig, fails *helperFailures) *Options {
	o := helperOptions(cfg, fails)
	o.Queues = []QueueConfig{
		{Name: "flowc", Concurrency: cfg.Concurrency, VisibilityTimeout: cfg.Visibility, Retry: FixedRetry(100, 10*time.Millisecond), Limits: flowConcLimits},
		{Name: "flowo", Concurrency: cfg.Concurrency, VisibilityTimeout: cfg.Visibility, Retry: FixedRetry(100, 10*time.Millisecond), Limits: flowOrdLimits},
		{Name: "flowr", Concurrency: cfg.Concurrency, VisibilityTimeout: cfg.Visibility, Retry: FixedRetry(100, 10*time.Millisecond), Limits: flowRateLimits},
	}
	return o
}

// flowRecord writes "S kind id group attempted start" when an attempt
// starts and "E kind id group end" when it ends, one write call each.
func flowHandler[J interface {
	Job
	Group() string
}](q *Queue, f *os.File, mu *sync.Mutex, fails *helperFailures) func(ctx context.Context, d *Delivery[J]) error {
	return func(ctx context.Context, d *Delivery[J]) error {
		start := time.Now().UnixNano()
		var attempted int64
		if d.Kind == (FlowRate{}).Kind() {
			info, err := q.Job(ctx, d.ID)
			if err != nil {
				fails.add(err)
				return err
			}
			attempted = info.AttemptedAt.UnixNano()
		}
		g := d.Job.Group()
		write := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			if _, err := f.WriteString(s); err != nil {
				fails.add(err)
			}
		}
		write(fmt.Sprintf("S %s %d %q %d %d\n", d.Kind, d.ID, g, attempted, start))
		// A bounded real-time pause standing for the handler's work, so
		// that attempts overlap.
		time.Sleep(time.Duration(d.ID%3) * 200 * time.Microsecond)
		write(fmt.Sprintf("E %s %d %q %d\n", d.Kind, d.ID, g, time.Now().UnixNano()))
		return nil
	}
}

func (FlowRate) Group() string { return "" }

func helperFlow(cfg helperConfig) error {
	fails := &helperFailures{}
	q, err := Open(cfg.Path, flowOptions(cfg, fails))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(cfg.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	Register(q, flowHandler[FlowConc](q, f, &mu, fails))
	Register(q, flowHandler[FlowOrd](q, f, &mu, fails))
	Register(q, flowHandler[FlowRate](q, f, &mu, fails))
	if err := q.Start(context.Background()); err != nil {
		return err
	}
	fmt.Println("ready")
	err = waitUntilDrained(q)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return errors.Join(err, q.Stop(ctx), q.Close(), fails.err())
}

// flowEvent is one record of the handlers.
type flowEvent struct {
	start       bool
	kind, group string
	id          int64
	attempted   int64
	at          int64
	pid         int
}

func TestFlowLimitsHoldAcrossThreeProcessesWithAKill(t *testing.T) {
	jobs := 10000
	if raceEnabled || testing.Short() {
		jobs = 1500
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	q, err := Open(path, &Options{Queues: []QueueConfig{
		{Name: "flowc", Limits: flowConcLimits}, {Name: "flowo", Limits: flowOrdLimits}, {Name: "flowr", Limits: flowRateLimits}}})
	require.NoError(t, err)
	ctx := context.Background()
	var items []BatchItem
	nOrd, nRate := jobs/5, jobs/10
	for i := range jobs - nOrd - nRate {
		items = append(items, BatchItem{Job: FlowConc{G: "g" + strconv.Itoa(i%4)}})
	}
	for i := range nOrd {
		items = append(items, BatchItem{Job: FlowOrd{G: "o" + strconv.Itoa(i%10)}})
	}
	for range nRate {
		items = append(items, BatchItem{Job: FlowRate{}})
	}
	for i := 0; i < len(items); i += 500 {
		_, err := q.EnqueueBatch(ctx, items[i:min(i+500, len(items))])
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())

	logs := make([]string, 3)
	procs := make([]*proc, 3)
	for i := range procs {
		logs[i] = filepath.Join(dir, fmt.Sprintf("log%d", i))
		procs[i] = startProc(t, "flow", helperConfig{Path: path, Log: logs[i], Concurrency: 8, Visibility: time.Second, Drain: true})
	}
	for _, p := range procs {
		p.waitReady()
	}
	// Kill the first worker once it has started a tenth of the jobs, or
	// once the three together started half of them: under load the first
	// worker may be starved by the other two, and the kill must still come
	// while there is work left.
	var first, all int
	require.NoError(t, poll(*procWait, 5*time.Millisecond, func() (bool, error) {
		first, all = countLines(logs[0]), 0
		for _, l := range logs {
			all += countLines(l)
		}
		return first >= jobs/10 || all >= jobs/2, nil
	}))
	require.NoError(t, procs[0].cmd.Process.Signal(syscall.SIGKILL))
	t.Logf("killed the first worker after it started %d attempts, the three %d (of %d jobs)", first, all, jobs)
	<-procs[0].done
	killedAt := time.Now().UnixNano()
	procs[1].wait()
	procs[2].wait()

	var evs []flowEvent
	for i, l := range logs {
		evs = append(evs, readFlowLog(t, l, i)...)
	}
	// Attempts the kill cut short end at the kill.
	open := map[[2]int64]bool{}
	for _, e := range evs {
		k := [2]int64{e.id, int64(e.pid)}
		open[k] = e.start
	}
	for k, o := range open {
		if o && k[1] == 0 {
			var kind, group string
			for _, e := range evs {
				if e.id == k[0] {
					kind, group = e.kind, e.group
				}
			}
			evs = append(evs, flowEvent{kind: kind, group: group, id: k[0], at: killedAt, pid: 0})
		}
	}
	slices.SortStableFunc(evs, func(a, b flowEvent) int {
		if a.at != b.at {
			return cmpInt64(a.at, b.at)
		}
		if a.start != b.start { // an end at the same nanosecond comes first
			if a.start {
				return 1
			}
			return -1
		}
		return 0
	})
	running := map[string]int{}
	group := map[string]int{}
	maxRun, maxGroup, maxOrd := 0, 0, 0
	lastOrd := map[string]int64{}
	ran := map[int64]bool{}
	var rateStarts []int64
	for _, e := range evs {
		gk := e.kind + "/" + e.group
		if !e.start {
			running[e.kind]--
			if e.group != "" {
				group[gk]--
			}
			continue
		}
		ran[e.id] = true
		running[e.kind]++
		if e.group != "" {
			group[gk]++
		}
		switch e.kind {
		case "flow_conc":
			maxRun = max(maxRun, running[e.kind])
			maxGroup = max(maxGroup, group[gk])
		case "flow_ord":
			maxOrd = max(maxOrd, group[gk])
			require.GreaterOrEqual(t, e.id, lastOrd[e.group], "ordered group %s started %d after %d", e.group, e.id, lastOrd[e.group])
			lastOrd[e.group] = e.id
		case "flow_rate":
			rateStarts = append(rateStarts, e.attempted)
		}
	}
	require.Len(t, ran, jobs, "every job ran")
	require.LessOrEqual(t, maxRun, flowConcLimits.Concurrency, "global limit")
	require.LessOrEqual(t, maxGroup, flowConcLimits.KeyConcurrency, "per-group limit")
	require.Equal(t, 1, maxOrd, "an ordered group never runs two at once")
	slices.Sort(rateStarts)
	n, per := flowRateLimits.Rate.N, int64(flowRateLimits.Rate.Per)
	for i := n; i < len(rateStarts); i++ {
		require.GreaterOrEqual(t, rateStarts[i]-rateStarts[i-n], per, "more than %d starts in a window of %s", n, flowRateLimits.Rate.Per)
	}
	t.Logf("%d jobs by 3 processes (one killed): at most %d running of limit %d, %d per group of %d, ordered groups one at a time, %d rate-limited starts",
		jobs, maxRun, flowConcLimits.Concurrency, maxGroup, flowConcLimits.KeyConcurrency, len(rateStarts))
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\nS ") + int(boolInt(strings.HasPrefix(string(b), "S ")))
}

func readFlowLog(t *testing.T, path string, pid int) []flowEvent {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []flowEvent
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			break // a line the kill tore is not complete: dropped
		}
		require.NoError(t, err)
		var e flowEvent
		var op string
		e.pid = pid
		if strings.HasPrefix(line, "S ") {
			_, err = fmt.Sscanf(line, "%s %s %d %q %d %d", &op, &e.kind, &e.id, &e.group, &e.attempted, &e.at)
			e.start = true
		} else {
			_, err = fmt.Sscanf(line, "%s %s %d %q %d", &op, &e.kind, &e.id, &e.group, &e.at)
		}
		require.NoError(t, err, "%q", line)
		out = append(out, e)
	}
	return out
}
