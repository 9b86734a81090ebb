// Command lqbench benchmarks litequeue on the scenarios of the peer harness
// (../shared/bench/peers: River, goqite and a no-queue SQLite floor) and
// prints exactly one JSON line in the harness's schema, peer "litequeue".
//
//	lqbench -scenario A|B|C|D|E -n 20000 -workers 10 -producers 16 -max 10s -pragmas 'synchronous(NORMAL)'
//
// A enqueues n jobs one call at a time; B in one EnqueueBatch call; C drains n
// pre-enqueued jobs with -workers handlers; D measures enqueue-to-handler
// latency with an idle worker (-cross-process: the jobs come from another
// process); E enqueues from -producers goroutines at once; idle counts the
// wake-ups of a started queue with nothing to do for -idle. Every scenario
// reports the bytes the process wrote to the device per job
// (write_bytes_per_job, from /proc/self/io on Linux; absent elsewhere, as
// io_counters says).
// The soak scenario (-scenario soak -duration 30m -report 1m -rate 200) runs
// a steady load with retries, dead letters and a reader process, and prints
// one JSON line per -report interval and a summary line (see soak.go).
// Its own scale knobs: -backlog N (C with N jobs, pre-enqueued in chunks) and
// -payload-bytes B (pad every payload to about B bytes). Logs go to stderr.
//
// -scenario D -commit-floor prints, as peer "pg-commit-floor" (-store
// postgres) or "sqlite-commit-floor", the latency of one bare INSERT commit
// after the same idle gaps: the least that a queue which starts a job only
// once its enqueue committed can show in D on that server or disk, the
// yardstick for D's figure beside the peers'.
//
// -scenario D -vs-floor samples that floor in turns with the queue in one
// run (each sample after its own idle gap, the order swapped every pair) and
// prints the floor's p50 and p99 beside the queue's and the differences.
//
// -prefill N -prefill-as STATE (growth.go) adds N jobs by direct SQL before
// any scenario and reports the Open and a Stats of the filled store.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue"
)

func main() {
	var c config
	var pragmas string
	var backlog int
	var lc limitsConfig
	flag.StringVar(&c.scenario, "scenario", "A", "A (enqueue one by one) | B (batch enqueue) | C (drain) | D (latency) | E (concurrent enqueue) | idle (wake-ups of a started, idle queue for -idle) | soak (steady load for -duration) | W (workflow dependant start latency) | fanin (one child of -n parents) | L (drains with and without a per-key limit, see limits.go)")
	flag.IntVar(&c.n, "n", 20000, "jobs for A/B/C/E; samples for D (default 200 when -scenario D and -n unset)")
	flag.IntVar(&c.workers, "workers", 10, "worker concurrency (QueueConfig.Concurrency) for C and D")
	flag.IntVar(&c.producers, "producers", 16, "E: concurrent producer goroutines")
	flag.DurationVar(&c.maxDur, "max", 0, "C: stop the clock after this long and report the rate so far (0 = until all n are done)")
	flag.StringVar(&pragmas, "pragmas", "", "extra comma-separated SQLite pragmas (modernc _pragma syntax), e.g. synchronous(NORMAL); they override the queue's own")
	flag.DurationVar(&c.gap, "gap", 200*time.Millisecond, "D: random idle gap gapmin+U[0,gap) before each enqueue")
	flag.DurationVar(&c.gapMin, "gapmin", 0, "D: fixed part of the idle gap")
	flag.Uint64Var(&c.seed, "seed", 1, "D: seed of the gap generator (PCG)")
	flag.StringVar(&c.dir, "dir", "", "base dir for the temp SQLite dir (default $TMPDIR)")
	flag.BoolVar(&c.keep, "keep", false, "keep the temp dir")
	flag.Duration("poll", 0, "ignored (a peer knob: litequeue wakes its workers in-process)")
	flag.Duration("cooldown", 0, "ignored (a peer knob)")
	flag.IntVar(&backlog, "backlog", 0, "C scale scenario: drain this many jobs (overrides -n; pre-enqueued in chunks of -setup-chunk)")
	flag.IntVar(&c.setupChunk, "setup-chunk", 0, "C: jobs per EnqueueBatch call of the untimed pre-enqueue (0 = 10000, fewer for big payloads: about 4 MiB of payload a call)")
	flag.IntVar(&c.payloadBytes, "payload-bytes", 0, "pad every payload to about this many bytes of JSON (0 = the harness's ~106 bytes)")
	flag.IntVar(&c.claimBatch, "claim-batch", 0, "Options.ClaimBatch (0 = the library default)")
	flag.StringVar(&c.store, "store", "sqlite", "sqlite | postgres (a fresh database per run, created through -pg and dropped at the end)")
	flag.StringVar(&c.pgURL, "pg", "", "-store postgres: admin URL; the run creates and drops lqbench_* databases beside its database (default $PG_URL, else postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	flag.BoolVar(&c.commitFloor, "commit-floor", false, "D: time one bare autocommit INSERT on a connection of its own after the same idle gaps, instead of the queue (the least a queue that runs a job only after its enqueue committed can take): on PostgreSQL in the run's database, on SQLite in a file of its own beside the queue's (WAL, synchronous FULL, -pragmas)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed part to this file")
	flag.StringVar(&c.memProfile, "memprofile", "", "write a heap profile at the end to this file")
	flag.BoolVar(&c.vsFloor, "vs-floor", false, "D: sample the commit floor (see -commit-floor) in turns with the queue in the same run, each after its own idle gap, and print the floor's p50 and p99 beside the queue's and the queue's excess over them")
	flag.BoolVar(&c.crossProcess, "cross-process", false, "D: enqueue from another process (an lqbench child on the same file), so the idle worker hears of each job through the file-change notification (or the poll), not in-process")
	flag.IntVar(&c.prefill, "prefill", 0, "growth: add this many jobs by direct SQL before the scenario, and report the Open and a Stats of the filled store (see -prefill-as)")
	flag.StringVar(&c.prefillAs, "prefill-as", "unhandled", "growth: what -prefill adds: unhandled (due, of a kind no handler takes, in the served queue) | pending (due, in a queue no worker serves) | scheduled (a year ahead) | dead | completed")
	flag.DurationVar(&c.idle, "idle", 10*time.Second, "idle: how long the started, idle queue is watched")
	flag.IntVar(&lc.keys, "keys", 1000, "L: groups the jobs are spread over, round-robin")
	flag.IntVar(&lc.keyConcurrency, "key-concurrency", 1, "L: QueueLimits.KeyConcurrency of the limited drains")
	flag.IntVar(&lc.rounds, "rounds", 3, "L: rounds of one limited and one unlimited drain each, in alternating order")
	dEnqueuer := flag.String("d-enqueuer", "", "internal: be the enqueuing process of -scenario D -cross-process on this file")
	soakDur := flag.Duration("duration", 30*time.Minute, "soak: how long to run")
	soakEvery := flag.Duration("report", time.Minute, "soak: print one JSON line per this interval")
	soakRate := flag.Int("rate", 200, "soak: jobs enqueued per second")
	soakReaderPath := flag.String("soak-reader", "", "internal: be the soak scenario's reader process on this file")
	flag.Parse()
	if *soakReaderPath != "" {
		soakReader(*soakReaderPath)
		return
	}
	if *dEnqueuer != "" {
		crossEnqueuer(*dEnqueuer, &c)
		return
	}

	nSet := false
	flag.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
	if (c.scenario == "D" || c.scenario == "W") && !nSet {
		c.n = 200
	}
	if backlog > 0 {
		c.n = backlog
	}
	if pragmas != "" {
		c.pragmas = strings.Split(pragmas, ",")
	}
	if c.payloadBytes > 0 {
		base, _ := json.Marshal(newJob(12345))
		if pad := c.payloadBytes - len(base) - len(`,"pad":""`); pad > 0 {
			padding = strings.Repeat("x", pad)
		}
	}

	if c.store != "sqlite" && c.store != "postgres" {
		fmt.Fprintf(os.Stderr, "lqbench: -store must be sqlite or postgres, not %q\n", c.store)
		os.Exit(2)
	}
	if c.store == "postgres" && (pragmas != "" || c.scenario == "soak") {
		fmt.Fprintln(os.Stderr, "lqbench: -pragmas and -scenario soak are for -store sqlite; for PostgreSQL put runtime settings into the -pg URL (e.g. &synchronous_commit=off)")
		os.Exit(2)
	}
	if c.crossProcess && (c.scenario != "D" || c.store != "sqlite") {
		fmt.Fprintln(os.Stderr, "lqbench: -cross-process is for -scenario D -store sqlite")
		os.Exit(2)
	}
	if c.commitFloor && c.scenario != "D" {
		fmt.Fprintln(os.Stderr, "lqbench: -commit-floor is for -scenario D")
		os.Exit(2)
	}
	if c.vsFloor && (c.scenario != "D" || c.commitFloor || c.crossProcess) {
		fmt.Fprintln(os.Stderr, "lqbench: -vs-floor is for -scenario D, without -commit-floor or -cross-process")
		os.Exit(2)
	}
	if c.prefill < 0 || c.prefill > 0 && (!prefillStates[c.prefillAs] || c.scenario == "soak" || c.commitFloor || c.crossProcess) {
		fmt.Fprintln(os.Stderr, "lqbench: -prefill takes a count >= 0, -prefill-as one of unhandled, pending, scheduled, dead, completed, and not -scenario soak, -commit-floor or -cross-process")
		os.Exit(2)
	}
	if c.scenario == "soak" {
		if runSoak(&c, *soakDur, *soakEvery, *soakRate) != nil {
			os.Exit(1)
		}
		return
	}
	res := &Result{Peer: "litequeue", Scenario: c.scenario, N: c.n, GoVersion: runtime.Version(), IOCounters: ioCounterSource}
	if c.commitFloor {
		// Not the queue's figure: see commitFloor (floor.go).
		res.Peer = "pg-commit-floor"
		if c.store == "sqlite" {
			res.Peer = "sqlite-commit-floor"
		}
	}
	var variant []string
	if pragmas != "" {
		variant = append(variant, "pragmas="+pragmas)
	}
	if c.scenario == "C" && c.maxDur != 0 {
		variant = append(variant, "max="+c.maxDur.String())
	}
	if c.scenario == "D" || c.scenario == "W" {
		v := "gap=U[0," + c.gap.String() + ")"
		if c.gapMin > 0 {
			v = "gap=" + c.gapMin.String() + "+" + v[4:]
		}
		variant = append(variant, v)
		if c.commitFloor {
			variant = append(variant, "commit-floor")
		}
		if c.vsFloor {
			variant = append(variant, "vs-floor")
		}
		if c.crossProcess {
			variant = append(variant, "cross-process")
		}
	}
	if backlog > 0 {
		variant = append(variant, "backlog="+strconv.Itoa(backlog))
	}
	if c.prefill > 0 {
		variant = append(variant, "prefill="+strconv.Itoa(c.prefill)+":"+c.prefillAs)
	}
	if c.payloadBytes > 0 {
		variant = append(variant, "payload="+strconv.Itoa(c.payloadBytes))
	}
	if c.claimBatch > 0 {
		variant = append(variant, "claim_batch="+strconv.Itoa(c.claimBatch))
	}
	res.Variant = strings.Join(variant, " ")
	if res.Variant == "" {
		res.Variant = "default"
	}
	pb, _ := json.Marshal(newJob(12345))
	res.PayloadSize = len(pb)
	if c.setupChunk <= 0 {
		c.setupChunk = max(1, min(10000, 4<<20/len(pb)))
	}

	var err error
	if c.scenario == "L" {
		err = runLimits(res, &c, lc)
		res.Settings = map[string]any{"store": c.store, "concurrency": c.workers,
			"options": "defaults (Durability Full) except Queues[default].Concurrency = -workers and, for the limited drains, Limits.KeyConcurrency = -key-concurrency"}
	} else {
		err = run(res, &c)
	}
	if c.memProfile != "" {
		writeHeapProfile(c.memProfile)
	}
	if err != nil {
		res.Error = err.Error()
		fmt.Fprintln(os.Stderr, "lqbench:", err)
	}
	res.PeakRSSMiB = peakRSSMiB()
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
}

// writeHeapProfile writes the heap profile (in use and allocated since start).
func writeHeapProfile(name string) {
	f, err := os.Create(name)
	if err == nil {
		runtime.GC()
		err = pprof.WriteHeapProfile(f)
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lqbench: heap profile:", err)
	}
}

func run(res *Result, c *config) (err error) {
	if c.n < 1 {
		return errors.New("-n must be at least 1")
	}
	dir, err := os.MkdirTemp(c.dir, "lqbench-")
	if err != nil {
		return err
	}
	if c.keep {
		fmt.Fprintln(os.Stderr, "keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	b := &bench{c: c}
	noop := func(*benchJob) {}
	b.handler.Store(&noop)
	b.opts = litequeue.Options{
		Pragmas:    c.pragmas,
		ClaimBatch: c.claimBatch,
		Queues:     []litequeue.QueueConfig{queueConfig(c.workers)},
	}
	if c.scenario == "C" || c.scenario == "D" {
		// Only the scenarios that run handlers read events (C finds its end
		// by them, both check that nothing fails). The enqueue scenarios
		// subscribe to nothing, as a producer usually does: a subscriber
		// costs each enqueue a wake-up of the OnEvent goroutine.
		b.opts.OnEvent = b.onEvent
	}
	var q *litequeue.Queue
	open := func() (*litequeue.Queue, error) { return litequeue.Open(b.path, &b.opts) }
	if c.store == "postgres" {
		run, err := newPGRun(context.Background(), c.pgURL)
		if err != nil {
			return err
		}
		b.pg = run
		defer run.close() // after q.Close (deferred below)
		open = func() (*litequeue.Queue, error) { return openPG(context.Background(), run, &b.opts) }
	} else {
		b.path = filepath.Join(dir, "lqbench.sqlite3")
	}
	q, err = open()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	b.q = q
	if c.prefill > 0 {
		if q, err = b.growth(context.Background(), res, q, open); err != nil {
			return err
		}
	}
	defer func() {
		if cerr := q.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
		b.finishIO(res)
	}()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[benchJob]) error {
		(*b.handler.Load())(&d.Job)
		return nil
	})
	defer func() { res.Settings = b.settings() }()

	ctx := context.Background()
	switch c.scenario {
	case "A":
		jobs := makeJobs(0, c.n)
		b.startIO(c.n)
		stop := b.profile()
		t0 := time.Now()
		for i := range jobs {
			if _, err := q.Enqueue(ctx, jobs[i], nil); err != nil {
				stop()
				return fmt.Errorf("enqueue %d: %w", i, err)
			}
		}
		el := time.Since(t0)
		stop()
		return b.finishEnqueue(ctx, res, el)

	case "B":
		items := batchItems(makeJobs(0, c.n))
		b.startIO(c.n)
		stop := b.profile()
		t0 := time.Now()
		_, err := q.EnqueueBatch(ctx, items)
		el := time.Since(t0)
		stop()
		if err != nil {
			return fmt.Errorf("enqueue batch: %w", err)
		}
		return b.finishEnqueue(ctx, res, el)

	case "C":
		res.Workers = c.workers
		return b.drain(ctx, res)

	case "D":
		if c.commitFloor {
			return b.commitFloor(ctx, res)
		}
		res.Workers = c.workers
		if c.crossProcess {
			return b.crossLatency(ctx, res)
		}
		return b.latency(ctx, res)

	case "idle":
		return b.idleWakeups(ctx, res)

	case "W":
		res.Workers = c.workers
		return b.flowLatency(ctx, res)

	case "fanin":
		res.Workers = c.workers
		return b.flowFanIn(ctx, res)

	case "E":
		if c.producers < 1 {
			return errors.New("-producers must be at least 1")
		}
		res.Producers = c.producers
		jobs := makeJobs(0, c.n)
		errs := make(chan error, c.producers)
		var wg sync.WaitGroup
		b.startIO(c.n)
		stop := b.profile()
		t0 := time.Now()
		for i := range c.producers {
			lo, hi := i*c.n/c.producers, (i+1)*c.n/c.producers
			wg.Go(func() { // producer i: jobs [i·n/P, (i+1)·n/P)
				for j := lo; j < hi; j++ {
					if _, err := q.Enqueue(ctx, jobs[j], nil); err != nil {
						errs <- fmt.Errorf("enqueue %d: %w", j, err)
						return
					}
				}
			})
		}
		wg.Wait()
		el := time.Since(t0)
		stop()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		return b.finishEnqueue(ctx, res, el)
	}
	return fmt.Errorf("unknown scenario %q; use A, B, C, D, E, idle, W or fanin", c.scenario)
}

func makeJobs(from, to int) []benchJob {
	jobs := make([]benchJob, 0, to-from)
	for i := from; i < to; i++ {
		jobs = append(jobs, newJob(i))
	}
	return jobs
}

func batchItems(jobs []benchJob) []litequeue.BatchItem {
	items := make([]litequeue.BatchItem, len(jobs))
	for i := range jobs {
		items[i] = litequeue.BatchItem{Job: jobs[i]}
	}
	return items
}

// profile starts the CPU profile of the timed part, if asked, and returns
// its stop.
func (b *bench) profile() (stop func()) {
	if b.c.cpuProfile == "" {
		return func() {}
	}
	f, err := os.Create(b.c.cpuProfile)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lqbench: cpu profile:", err)
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}
}

// finishEnqueue (A, B, E) counts the queued jobs: exactly n, or the run fails.
func (b *bench) finishEnqueue(ctx context.Context, res *Result, el time.Duration) error {
	res.ElapsedS = el.Seconds()
	res.JobsPerS = float64(b.c.n) / el.Seconds()
	queued, running, other, err := b.counts(ctx)
	if err != nil {
		return err
	}
	res.Completed = int64(queued)
	if queued != b.c.n || running != 0 || other != 0 {
		return fmt.Errorf("expected %d queued jobs, found %d queued, %d running, %d completed or dead", b.c.n, queued, running, other)
	}
	return nil
}

// drain (C) pre-enqueues n jobs in batches (untimed), starts the workers and
// times until every job's success is committed: EventSucceeded fires after
// the commit that deletes the job.
func (b *bench) drain(ctx context.Context, res *Result) error {
	c := b.c
	t0 := time.Now()
	for from := 0; from < c.n; from += c.setupChunk {
		items := batchItems(makeJobs(from, min(from+c.setupChunk, c.n)))
		if _, err := b.q.EnqueueBatch(ctx, items); err != nil {
			return fmt.Errorf("pre-enqueue: %w", err)
		}
	}
	res.SetupS = time.Since(t0).Seconds()
	runtime.GC() // the setup's garbage is not the drain's
	// The setup's pages go into the file now, so that the drain's written
	// bytes are the drain's.
	if err := b.checkpoint(ctx); err != nil {
		return err
	}
	b.startIO(c.n)

	var handled atomic.Int64
	allWorked := make(chan struct{})
	n := int64(c.n)
	h := func(*benchJob) {
		if handled.Add(1) == n {
			close(allWorked)
		}
	}
	b.handler.Store(&h)
	b.doneN, b.allDone = n, make(chan struct{})

	var capC <-chan time.Time
	if c.maxDur > 0 {
		capC = time.After(c.maxDur)
	}
	safety := time.After(15 * time.Minute)
	stop := b.profile()
	defer stop()
	dropped := b.q.DroppedEvents() // the setup's enqueued events may overflow the buffer
	start := time.Now()
	if err := b.q.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	var workedAt time.Duration
	emptied := false // events were dropped, and the table was found empty
	select {
	case <-allWorked:
		workedAt = time.Since(start)
		// EventSucceeded (after the commit) tells when the last success is
		// durable. OnEvent's buffer drops events when its goroutine falls
		// behind; then the table is read until it is empty instead.
		tick := time.NewTicker(5 * time.Millisecond)
	wait:
		for {
			select {
			case <-b.allDone:
				break wait
			case <-capC:
				break wait
			case <-safety:
				break wait
			case <-tick.C:
				if b.q.DroppedEvents() == dropped {
					continue
				}
				queued, running, other, err := b.counts(ctx)
				if err != nil {
					tick.Stop()
					return err
				}
				if queued+running+other == 0 {
					emptied = true
					break wait
				}
			}
		}
		tick.Stop()
	case <-b.allDone: // cannot come first, but never mind
	case <-capC:
	case <-safety:
	}
	el := time.Since(start)
	done := b.succeeded.Load()
	if emptied {
		done = n
		res.EventsDropped = b.q.DroppedEvents() - dropped
	}
	stop()
	if workedAt > 0 {
		res.WorkedS = workedAt.Seconds()
	}
	res.ElapsedS = el.Seconds()
	res.Completed = done
	res.JobsPerS = float64(done) / el.Seconds()
	res.Capped = done < n
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := b.q.Stop(sctx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if err := b.failure(); err != nil {
		return err
	}
	if res.Capped && c.maxDur == 0 {
		return fmt.Errorf("timed out after 15m with %d of %d jobs done", done, n)
	}
	if !res.Capped { // check the table agrees: nothing left
		queued, running, other, err := b.counts(ctx)
		if err != nil {
			return err
		}
		if queued+running+other != 0 {
			return fmt.Errorf("all %d successes reported, but the table still holds %d queued, %d running, %d other jobs", n, queued, running, other)
		}
	}
	return nil
}

// latency (D) follows the harness: an idle worker, one warm-up job, 500 ms
// idle, then n times: sleep gapmin+U[0,gap) (PCG, -seed), enqueue one job and
// wait for its handler. Latency = enqueue call start -> handler start. With
// -vs-floor each sample of the queue has one of the commit floor beside it,
// after its own gap, first on odd samples and second on even ones.
func (b *bench) latency(ctx context.Context, res *Result) error {
	c := b.c
	var floorInsert func(payload []byte) error
	var floor []float64
	if c.vsFloor {
		insert, closeFloor, err := b.openFloor(ctx)
		if err != nil {
			return err
		}
		defer closeFloor()
		floorInsert = insert
		payload, _ := json.Marshal(newJob(-1))
		if err := insert(payload); err != nil { // warm-up, as the queue's
			return fmt.Errorf("commit floor: %w", err)
		}
		floor = make([]float64, 0, c.n)
	}
	hits := make(chan hit, 16)
	h := func(j *benchJob) { hits <- hit{j.ID, time.Now()} }
	b.handler.Store(&h)
	if err := b.q.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = b.q.Stop(sctx)
	}()
	wait := func(id int) (time.Time, error) {
		timeout := time.After(30 * time.Second)
		for {
			select {
			case h := <-hits:
				if h.id == id {
					return h.at, nil
				}
			case <-timeout:
				return time.Time{}, fmt.Errorf("job %d not started within 30s", id)
			}
		}
	}
	if _, err := b.q.Enqueue(ctx, newJob(-1), nil); err != nil {
		return fmt.Errorf("warm-up enqueue: %w", err)
	}
	if _, err := wait(-1); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	time.Sleep(500 * time.Millisecond)

	gap := c.gaps()
	lat := make([]float64, 0, c.n)
	enq := make([]float64, 0, c.n)
	b.startIO(c.n)
	stop := b.profile()
	defer stop()
	t00 := time.Now()
	sampleFloor := func(i int) error {
		if floorInsert == nil {
			return nil
		}
		time.Sleep(gap())
		v, err := floorSample(floorInsert, i)
		floor = append(floor, v)
		return err
	}
	for i := 0; i < c.n; i++ {
		if i%2 == 1 {
			if err := sampleFloor(i); err != nil {
				return err
			}
		}
		time.Sleep(gap())
		job := newJob(i)
		t0 := time.Now()
		if _, err := b.q.Enqueue(ctx, job, nil); err != nil {
			return fmt.Errorf("enqueue %d: %w", i, err)
		}
		enq = append(enq, ms(time.Since(t0)))
		at, err := wait(i)
		if err != nil {
			return err
		}
		lat = append(lat, ms(at.Sub(t0)))
		if i%2 == 0 {
			if err := sampleFloor(i); err != nil {
				return err
			}
		}
	}
	res.ElapsedS = time.Since(t00).Seconds()
	latencies(res, lat)
	if floorInsert != nil {
		vsFloor(res, floor)
	}
	sort.Float64s(enq)
	res.EnqP50Ms = round3(pct(enq, 50))
	return b.failure()
}

// settings describes everything that affects speed, with the SQLite settings
// read back from the queue's writer connection.
func (b *bench) settings() map[string]any {
	o := b.opts
	claim := o.ClaimBatch
	if claim == 0 {
		claim = litequeue.DefaultClaimBatch
	}
	s := map[string]any{
		"driver":            "modernc.org/sqlite (database/sql), litequeue.Open",
		"pragmas":           append([]string{"journal_mode(WAL)", "busy_timeout(5000)", "foreign_keys(1)", "synchronous(FULL) (Durability default; -pragmas override it)"}, o.Pragmas...),
		"connections":       "writer: 1 (all writes, group commit); reads: pool of up to 4",
		"group_commit":      "every waiting write (enqueues, claims, failures, lease extensions) plus all pending successes share one transaction, up to 512 ops",
		"claim_batch":       claim,
		"prefetch":          "claimed ahead of the handlers: up to two allowances of about what they start in 10ms, or in twice the last claim's time up to 50ms (measured as they run), each at most claim_batch; the next claim goes out while one allowance waits",
		"concurrency":       b.c.workers,
		"completions":       "asynchronous, batched into the writer's next transaction; EventSucceeded after the commit",
		"wakeups":           "in-process on enqueue and on freed slots; cross-process: PRAGMA data_version read on each file-change notification of the file or its WAL (fsnotify), and every 10s (50 × PollInterval) as a backstop; every 200ms where notifications are not available",
		"options":           "defaults (Durability Full) except Queues[default].Concurrency = -workers",
		"on_event":          b.opts.OnEvent != nil,
		"pre_enqueue_chunk": b.c.setupChunk,
	}
	if b.pg != nil {
		s["store"] = "postgres"
		s["driver"] = "github.com/jackc/pgx/v5 (stdlib for database/sql, native batches inside), postgres.Open"
		s["pg_url"] = redact(b.pg.admin)
		s["connections"] = "writer: one pooled connection per batch (all writes, group commit, one round trip per batch); LISTEN: 1; reads: pool"
		s["group_commit"] = "every waiting write (enqueues merged into one INSERT, claims, failures, lease extensions) plus all pending successes share one implicit transaction, up to 256 ops"
		s["wakeups"] = "in-process on enqueue and on freed slots; cross-process LISTEN/NOTIFY (poll every 200ms only while the listener is down or hears nothing, as behind a transaction pooler; else a look after each quiet second)"
		s["pragmas"] = nil
		s["options"] = "defaults except Queues[default].Concurrency = -workers; durability = server settings"
		s["pg_settings_effective"] = pgSettings(b.pg)
		if b.c.commitFloor || b.c.vsFloor {
			s["commit_floor"] = "one autocommit INSERT (pgx, prepared) into a table with a primary key only, on a connection of its own, per sample; latency = that Exec"
		}
		return s
	}
	s["store"] = "sqlite"
	if b.c.commitFloor || b.c.vsFloor {
		s["commit_floor"] = "one autocommit INSERT (prepared) into a table with an integer primary key only, in a file of its own (WAL, synchronous FULL, then -pragmas), on one connection, per sample; latency = that Exec"
	}
	if b.q != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if eff, err := b.q.Pragmas(ctx); err == nil {
			s["sqlite_pragmas_effective"] = eff
		} else {
			s["sqlite_pragmas_effective"] = "read failed: " + err.Error()
		}
	}
	return s
}
