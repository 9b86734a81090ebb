package litequeue

import (
	"context"
	"flag"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	flagKills = flag.Int("lq.kills", underRace(50, 20), "SIGKILLs of worker processes in TestWorkersKilledAtRandomLoseNothing (the producer test kills half as many, at least 20); 20 by default under -race, 50 without")
	flagSeed  = flag.Uint64("lq.seed", 0, "seed of the crash tests' kill schedule; 0 picks one and logs it")
)

// killSchedule returns the seeded source of kill moments, logging the seed.
func killSchedule(t *testing.T) *rand.Rand {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("kill schedule seed %d (replay with -lq.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0x11))
}

// killAtRandom starts a helper and SIGKILLs it at a moment drawn from rng:
// one time in five during start-up (possibly inside Open, while SQLite
// recovers the WAL the last victim left), otherwise up to maxRun after it
// is ready. It returns the pid if the process died of the kill.
func killAtRandom(t *testing.T, rng *rand.Rand, role string, cfg helperConfig, maxRun time.Duration) (int, bool) {
	p := startProc(t, role, cfg)
	var delay time.Duration
	if rng.IntN(5) == 0 {
		delay = time.Duration(rng.Int64N(int64(150 * time.Millisecond)))
	} else {
		p.waitReady()
		delay = time.Duration(rng.Int64N(int64(maxRun)))
	}
	// A real-time wait: the victim is another process running on the real
	// clock, and the point is to kill it at an arbitrary moment of its work.
	time.Sleep(delay)
	return p.pid(), p.kill()
}

func TestWorkersKilledAtRandomLoseNothing(t *testing.T) {
	rng := killSchedule(t)
	dir := t.TempDir()
	cfg := helperConfig{
		Path: filepath.Join(dir, "q.db"), Log: filepath.Join(dir, "side.log"),
		Kinds:       []string{ProcJob{}.Kind(), ProcOnce{}.Kind()},
		Concurrency: 4, ClaimBatch: 16, Attempts: 1000, Fsync: true, Produce: 30,
		// Long enough that a live process never loses a lease (the machine
		// is shared and slow under -race); the jobs a victim held come back
		// this long after its death while the next process works on others.
		Visibility: 5 * time.Second,
	}
	kindOf := map[int64]string{}
	n := 0
	topUp := func(count int) {
		jobs := make([]Job, count)
		for i := range jobs {
			if n%10 == 0 {
				jobs[i] = ProcOnce{N: n}
			} else {
				jobs[i] = ProcJob{N: n}
			}
			n++
		}
		for i, id := range seedQueue(t, cfg.Path, jobs) {
			kindOf[id] = jobs[i].Kind()
		}
	}
	// Under -race fewer jobs: the final run drains what the victims left.
	initial, low, more := underRace(1500, 600), underRace(300, 150), underRace(600, 300)
	topUp(initial)
	killed := map[int]bool{}
	start := time.Now()
	for len(killed) < *flagKills {
		if liveCount(t, cfg.Path) < low {
			topUp(more) // keep the victims busy
		}
		if pid, ok := killAtRandom(t, rng, "worker", cfg, 300*time.Millisecond); ok {
			killed[pid] = true
		}
	}
	t.Logf("%d worker processes killed in %s", len(killed), time.Since(start).Round(time.Millisecond))

	// A final clean run drains the queue (waiting out the victims' leases).
	drain := cfg
	drain.Drain, drain.Produce = true, 0
	final := startProc(t, "worker", drain)
	final.wait()

	checkInvariants(t, cfg.Path)
	require.Zero(t, liveCount(t, cfg.Path), "jobs left pending, running or leased")
	type run struct{ pid, attempt int }
	completions := map[int64][]run{}
	starts := map[int64]int{}
	for _, r := range readSideLog(t, cfg.Log) {
		switch r.op {
		case "E":
			_, dup := kindOf[r.id]
			require.False(t, dup, "id %d enqueued twice", r.id)
			kindOf[r.id] = r.kind
		case "S":
			starts[r.id]++
		case "C":
			completions[r.id] = append(completions[r.id], run{r.pid, r.attempt})
		}
	}
	unrecorded := 0
	for id := range completions {
		if _, ok := kindOf[id]; !ok {
			// A victim's producer was killed after Enqueue returned and
			// before it recorded the id: one such job per kill at most.
			unrecorded++
			kindOf[id] = ProcJob{}.Kind()
		}
	}
	require.LessOrEqual(t, unrecorded, len(killed), "more completed jobs that nobody enqueued than kills")

	q, err := Open(cfg.Path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer q.Close()
	deadRows, err := q.DeadLetters(t.Context(), JobFilter{Limit: -1})
	require.NoError(t, err)
	dead := map[int64]JobInfo{}
	for _, j := range deadRows {
		dead[j.ID] = j
	}
	lostPerPid := map[int]int{}
	dups := 0
	for id, kind := range kindOf {
		if j, ok := dead[id]; ok {
			// Only a job whose only attempt died with its process may give
			// up here, and it says so.
			require.Equal(t, ProcOnce{}.Kind(), kind, "job %d of kind %s is dead: %s", id, kind, j.DeadReason)
			require.Equal(t, "attempts used up: attempt 1 of 1 was lost with its process (lease expired)", j.DeadReason, "job %d", id)
			require.Equal(t, 1, j.Attempt, "job %d: attempts above its policy", id)
			continue
		}
		runs := completions[id]
		require.NotEmpty(t, runs, "job %d (%s) was accepted, is not dead and never completed", id, kind)
		if kind == (ProcOnce{}).Kind() {
			require.LessOrEqual(t, starts[id], 1, "job %d of one attempt started %d times", id, starts[id])
		}
		// Only a kill may make a job run twice: every completion but the
		// last was lost with a killed process, each by another process and
		// a later attempt.
		for i := range len(runs) - 1 {
			require.True(t, killed[runs[i].pid], "job %d completed twice, first by process %d, which was not killed", id, runs[i].pid)
			require.Less(t, runs[i].attempt, runs[i+1].attempt, "job %d: attempts %v", id, runs)
			lostPerPid[runs[i].pid]++
			dups++
		}
	}
	for pid, lost := range lostPerPid {
		// A process holds at most Concurrency + 2 × ClaimBatch leases, and
		// a claimed job stays held until its success commits.
		require.LessOrEqual(t, lost, cfg.Concurrency+2*cfg.ClaimBatch, "process %d lost %d completions", pid, lost)
	}
	t.Logf("%d jobs: %d ran twice (a kill lost the success), %d dead letters (their only attempt was killed)", len(kindOf), dups, len(dead))
}

func TestProducerKilledMidBatchCommitsWholeBatchesOnly(t *testing.T) {
	rng := killSchedule(t)
	dir := t.TempDir()
	cfg := helperConfig{Path: filepath.Join(dir, "q.db"), Log: filepath.Join(dir, "side.log"), Batch: 50, Fsync: true}
	seedQueue(t, cfg.Path, nil)
	kills := 0
	for kills < max(*flagKills/2, 20) {
		if _, ok := killAtRandom(t, rng, "producer", cfg, 200*time.Millisecond); ok {
			kills++
		}
	}
	checkInvariants(t, cfg.Path)
	q, err := Open(cfg.Path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer q.Close()
	rows, err := q.lite.DB().Query(`SELECT json_extract(payload, '$.p'), json_extract(payload, '$.b'), count(*)
		FROM lq_jobs GROUP BY 1, 2`)
	require.NoError(t, err)
	defer rows.Close()
	type batch struct{ pid, b int }
	stored := map[batch]bool{}
	lastOf := map[int]int{}
	for rows.Next() {
		var b batch
		var n int
		require.NoError(t, rows.Scan(&b.pid, &b.b, &n))
		require.Equal(t, cfg.Batch, n, "batch %d of process %d is partly stored", b.b, b.pid)
		stored[b] = true
		lastOf[b.pid] = max(lastOf[b.pid], b.b)
	}
	require.NoError(t, rows.Err())
	for pid, last := range lastOf {
		for b := range last {
			require.True(t, stored[batch{pid, b}], "process %d: batch %d missing though batch %d is stored", pid, b, last)
		}
	}
	recorded := 0
	for _, r := range readSideLog(t, cfg.Log) {
		require.True(t, stored[batch{r.pid, int(r.id)}], "batch %d of process %d returned nil but is not stored", r.id, r.pid)
		recorded++
	}
	t.Logf("%d producers killed; %d batches stored, %d of them acknowledged before the kill", kills, len(stored), recorded)
}

// detachedPool returns a pool of the named queue for q's registered kinds
// whose claims and executions the test drives one call at a time, with no
// dispatcher, workers or lease extender: dropping its deliveries is a crash.
func detachedPool(q *Queue, queue string) *pool {
	var kinds []string
	q.mu.Lock()
	for kind, h := range q.handlers {
		if h.queue == queue {
			kinds = append(kinds, kind)
		}
	}
	q.mu.Unlock()
	return testPool(q, q.config(queue), 4096, kinds...)
}

// claimUpTo claims up to n jobs with p and returns them, most urgent first.
func claimUpTo(t *testing.T, p *pool, n int) []*delivery {
	t.Helper()
	got, err := p.claim(n)
	require.NoError(t, err)
	ds := make([]*delivery, got)
	for i := range ds {
		ds[i] = p.pop(nil)
	}
	return ds
}

func TestLostBurialClaimKeepsAttemptsWithinPolicy(t *testing.T) {
	h := setup(t, nil) // default policy: one attempt
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	vis := h.q.config(DefaultQueue).VisibilityTimeout
	for range 3 {
		// A process claims the job and dies with it: its first attempt, then
		// the claims that were only meant to bury it.
		require.Len(t, claimUpTo(t, detachedPool(h.q, DefaultQueue), 10), 1)
		h.clock.Add(vis)
	}
	p := detachedPool(h.q, DefaultQueue)
	ds := claimUpTo(t, p, 10)
	require.Len(t, ds, 1)
	p.execute(ds[0])
	j, err := h.q.DeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 1, j.Attempt, "attempts above the policy")
	require.Equal(t, "attempts used up: attempt 1 of 1 was lost with its process (lease expired)", j.DeadReason)
	require.Equal(t, 0, h.ev.count(EventStarted, id), "the job ran again")
}
