package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

// The exactness of flow control across three worker processes on one
// PostgreSQL schema, with one of them killed: the handlers record when each
// attempt started and ended (real time), and the records must show the
// limits held at every moment.

const flowHelperEnv = "LITEQUEUE_PG_FLOW_HELPER"

var (
	pgFlowConc = litequeue.QueueLimits{Concurrency: 6, KeyConcurrency: 2}
	pgFlowOrd  = litequeue.QueueLimits{Ordered: true}
	pgFlowRate = litequeue.QueueLimits{Rate: litequeue.Rate{N: 40, Per: 20 * time.Millisecond}}
)

type PGFlowConc struct {
	G string `json:"g"`
}

func (PGFlowConc) Kind() string      { return "flow_conc" }
func (PGFlowConc) QueueName() string { return "flowc" }
func (j PGFlowConc) Group() string   { return j.G }

type PGFlowOrd struct {
	G string `json:"g"`
}

func (PGFlowOrd) Kind() string      { return "flow_ord" }
func (PGFlowOrd) QueueName() string { return "flowo" }
func (j PGFlowOrd) Group() string   { return j.G }

type PGFlowRate struct{}

func (PGFlowRate) Kind() string      { return "flow_rate" }
func (PGFlowRate) QueueName() string { return "flowr" }
func (PGFlowRate) Group() string     { return "" }

// pgFlowVisibility is the workers' VisibilityTimeout: long enough that
// only the killed worker's leases lapse. A lease that lapses while its
// handler still runs frees the job's slot by design (the job is taken over
// and may run twice at once), so the records would show one job too many
// under a limit: with a one-second lease that happened on a loaded CI
// machine, where a lease extension (every third of the timeout) or the
// hand-off of a claim to its handler was held up for over a second (7
// running of limit 6, two of an ordered group). The killed worker's slots
// stay taken this long after the kill, then free.
const pgFlowVisibility = 5 * time.Second

func pgFlowOptions() *litequeue.Options {
	qc := func(name string, l litequeue.QueueLimits) litequeue.QueueConfig {
		return litequeue.QueueConfig{Name: name, Concurrency: 8, VisibilityTimeout: pgFlowVisibility, Retry: litequeue.FixedRetry(100, 10*time.Millisecond), Limits: l}
	}
	return &litequeue.Options{PollInterval: 20 * time.Millisecond,
		Queues: []litequeue.QueueConfig{qc("flowc", pgFlowConc), qc("flowo", pgFlowOrd), qc("flowr", pgFlowRate)}}
}

func pgFlowHandler[J interface {
	litequeue.Job
	Group() string
}](q *litequeue.Queue, db *sql.DB) func(ctx context.Context, d *litequeue.Delivery[J]) error {
	pid := os.Getpid()
	return func(ctx context.Context, d *litequeue.Delivery[J]) error {
		start := time.Now().UnixNano()
		var attempted int64
		if d.Kind == (PGFlowRate{}).Kind() {
			info, err := q.Job(ctx, d.ID)
			if err != nil {
				return err
			}
			attempted = info.AttemptedAt.UnixNano()
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO lqt_flow (id, kind, grp, attempted, pid, start_ns) VALUES ($1, $2, $3, $4, $5, $6)`,
			d.ID, d.Kind, d.Job.Group(), attempted, pid, start); err != nil {
			return err
		}
		// A bounded real-time pause standing for the handler's work.
		time.Sleep(time.Duration(d.ID%3) * 200 * time.Microsecond)
		_, err := db.ExecContext(ctx, `UPDATE lqt_flow SET end_ns = $1 WHERE id = $2 AND pid = $3 AND start_ns = $4`,
			time.Now().UnixNano(), d.ID, pid, start)
		return err
	}
}

// TestFlowHelperProcess is a worker process of the flow test when
// flowHelperEnv is set; it exits once nothing is live.
func TestFlowHelperProcess(t *testing.T) {
	if os.Getenv(flowHelperEnv) == "" {
		t.Skip("a helper process for TestFlowLimitsHoldAcrossThreeProcessesWithAKill")
	}
	u := os.Getenv(flowHelperEnv)
	ctx := context.Background()
	q, err := postgres.Open(ctx, u, pgFlowOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	// The records go in without waiting for their WAL flush: they are
	// read once every worker has exited, and the server does not crash
	// meanwhile. Two flushes per attempt were most of the workers' waits.
	db, err := sql.Open("pgx", u+"&synchronous_commit=off")
	if err != nil {
		os.Exit(2)
	}
	litequeue.Register(q, pgFlowHandler[PGFlowConc](q, db))
	litequeue.Register(q, pgFlowHandler[PGFlowOrd](q, db))
	litequeue.Register(q, pgFlowHandler[PGFlowRate](q, db))
	if err := q.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	deadline := time.Now().Add(procWait)
	for time.Now().Before(deadline) { // a bounded real-time wait for the drain
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM lq_jobs WHERE state IN (0, 1)`).Scan(&n); err != nil || n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := q.Stop(stop); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		os.Exit(2)
	}
	q.Close()
	os.Exit(0)
}

func TestFlowLimitsHoldAcrossThreeProcessesWithAKill(t *testing.T) {
	jobs := 10000
	if testing.Short() {
		jobs = 1500
	}
	u, _ := pgtest.FreshSchema(t)
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE lqt_flow (id bigint NOT NULL, kind text NOT NULL, grp text NOT NULL, attempted bigint NOT NULL,
		pid integer NOT NULL, start_ns bigint NOT NULL, end_ns bigint)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, err := postgres.Open(ctx, u, pgFlowOptions())
	if err != nil {
		t.Fatal(err)
	}
	var items []litequeue.BatchItem
	nOrd, nRate := jobs/5, jobs/10
	for i := range jobs - nOrd - nRate {
		items = append(items, litequeue.BatchItem{Job: PGFlowConc{G: "g" + strconv.Itoa(i%4)}})
	}
	for i := range nOrd {
		items = append(items, litequeue.BatchItem{Job: PGFlowOrd{G: "o" + strconv.Itoa(i%10)}})
	}
	for range nRate {
		items = append(items, litequeue.BatchItem{Job: PGFlowRate{}})
	}
	if _, err := q.EnqueueBatch(ctx, items); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var procs []*exec.Cmd
	for range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFlowHelperProcess$")
		cmd.Env = append(os.Environ(), flowHelperEnv+"="+u)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	// Kill the first worker once it has started a tenth of the jobs, or
	// once the three together started half of them: under load the first
	// worker may be starved by the other two, and the kill must still come
	// while there is work left.
	deadline := time.Now().Add(procWait)
	var first, all int
	for {
		if err := db.QueryRow(`SELECT count(*) FILTER (WHERE pid = $1), count(*) FROM lqt_flow`, procs[0].Process.Pid).Scan(&first, &all); err != nil {
			t.Fatal(err)
		}
		if first >= jobs/10 || all >= jobs/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workers started %d attempts (the first %d) of %d jobs in %s", all, first, jobs, procWait)
		}
		time.Sleep(5 * time.Millisecond) // a bounded real-time wait
	}
	t.Logf("killing the first worker after it started %d attempts, the three %d (of %d jobs)", first, all, jobs)
	procs[0].Process.Signal(syscall.SIGKILL)
	procs[0].Wait()
	killedAt := time.Now().UnixNano()
	for _, p := range procs[1:] {
		if err := p.Wait(); err != nil {
			t.Fatalf("worker %d: %v", p.Process.Pid, err)
		}
	}

	type ev struct {
		start     bool
		kind, grp string
		id, at    int64
	}
	rows, err := db.Query(`SELECT id, kind, grp, attempted, start_ns, coalesce(end_ns, $1) FROM lqt_flow`, killedAt)
	if err != nil {
		t.Fatal(err)
	}
	var evs []ev
	var rateStarts []int64
	ran := map[int64]bool{}
	spans := map[int64][][2]int64{}
	for rows.Next() {
		var id, attempted, s, e int64
		var kind, grp string
		if err := rows.Scan(&id, &kind, &grp, &attempted, &s, &e); err != nil {
			t.Fatal(err)
		}
		ran[id] = true
		spans[id] = append(spans[id], [2]int64{s, e})
		evs = append(evs, ev{true, kind, grp, id, s}, ev{false, kind, grp, id, e})
		if kind == "flow_rate" {
			rateStarts = append(rateStarts, attempted)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(evs, func(a, b ev) int {
		switch {
		case a.at != b.at && a.at < b.at:
			return -1
		case a.at != b.at:
			return 1
		case a.start == b.start:
			return 0
		case a.start:
			return 1
		}
		return -1
	})
	running, group := map[string]int{}, map[string]int{}
	maxRun, maxGroup, maxOrd := 0, 0, 0
	lastOrd := map[string]int64{}
	for _, e := range evs {
		gk := e.kind + "/" + e.grp
		if !e.start {
			running[e.kind]--
			group[gk]--
			continue
		}
		running[e.kind]++
		group[gk]++
		switch e.kind {
		case "flow_conc":
			maxRun = max(maxRun, running[e.kind])
			maxGroup = max(maxGroup, group[gk])
		case "flow_ord":
			maxOrd = max(maxOrd, group[gk])
			if e.id < lastOrd[e.grp] {
				t.Errorf("ordered group %s started %d after %d", e.grp, e.id, lastOrd[e.grp])
			}
			lastOrd[e.grp] = e.id
		}
	}
	// Two attempts of one job running at once mean a lease lapsed while its
	// handler still ran (the killed worker's attempts end at the kill, so
	// they never overlap their takeover).
	overlaps := 0
	for _, sp := range spans {
		slices.SortFunc(sp, func(a, b [2]int64) int { return int(min(max(a[0]-b[0], -1), 1)) })
		for i := 1; i < len(sp); i++ {
			if sp[i][0] < sp[i-1][1] {
				overlaps++
			}
		}
	}
	if len(ran) != jobs {
		t.Errorf("%d jobs ran, want %d", len(ran), jobs)
	}
	if maxRun > pgFlowConc.Concurrency || maxGroup > pgFlowConc.KeyConcurrency || maxOrd != 1 {
		t.Errorf("at most %d running (limit %d), %d per group (limit %d), %d of an ordered group (want 1); %d jobs had two attempts at once (a lease of %s lapsed while its handler ran)",
			maxRun, pgFlowConc.Concurrency, maxGroup, pgFlowConc.KeyConcurrency, maxOrd, overlaps, pgFlowVisibility)
	}
	slices.Sort(rateStarts)
	n, per := pgFlowRate.Rate.N, int64(pgFlowRate.Rate.Per)
	for i := n; i < len(rateStarts); i++ {
		if rateStarts[i]-rateStarts[i-n] < per {
			var dump []string
			rows, _ := db.Query(`SELECT id, pid, attempted, start_ns FROM lqt_flow WHERE kind = 'flow_rate' AND attempted BETWEEN $1 AND $2 ORDER BY attempted`, rateStarts[i-n], rateStarts[i])
			for rows.Next() {
				var id, pid, a, s int64
				rows.Scan(&id, &pid, &a, &s)
				dump = append(dump, fmt.Sprintf("%d/%d/%d/%d", id, pid, a-rateStarts[i-n], s-a))
			}
			rows.Close()
			t.Fatalf("more than %d starts in a window of %s: %v", n, pgFlowRate.Rate.Per, dump)
		}
	}
	t.Logf("%d jobs with two attempts at once", overlaps)
	kinds, err := db.Query(`SELECT kind, count(*), (max(start_ns) - min(start_ns)) / 1000000 FROM lqt_flow GROUP BY kind ORDER BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	for kinds.Next() {
		var kind string
		var n, ms int64
		if err := kinds.Scan(&kind, &n, &ms); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d attempts over %d ms", kind, n, ms)
	}
	kinds.Close()
	t.Logf("%d jobs by 3 processes (one killed): at most %d running of limit %d, %d per group of %d, ordered groups one at a time, %d rate-limited starts",
		jobs, maxRun, pgFlowConc.Concurrency, maxGroup, pgFlowConc.KeyConcurrency, len(rateStarts))
}
