package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/benchjob"
)

// One benchmark run's settings (config), its state (bench) and result
// (Result), and the arithmetic every measurement shares.

// padding is the Pad value that brings every payload to about -payload-bytes.
var padding string

type benchJob = benchjob.Job

func newJob(i int) benchJob { return benchjob.New(i, padding) }

// Result is one JSON line, in the harness's schema.
type Result struct {
	Peer      string   `json:"peer"`
	Scenario  string   `json:"scenario"`
	Variant   string   `json:"variant"`
	N         int      `json:"n"`
	Workers   int      `json:"workers"`
	Producers int      `json:"producers,omitempty"`
	Completed int64    `json:"completed"`
	ElapsedS  float64  `json:"elapsed_s"`
	JobsPerS  float64  `json:"jobs_per_s"`
	Capped    bool     `json:"capped,omitempty"`
	WorkedS   float64  `json:"worked_s,omitempty"`
	SetupS    float64  `json:"setup_s,omitempty"`
	P50Ms     *float64 `json:"p50_ms,omitempty"`
	P99Ms     *float64 `json:"p99_ms,omitempty"`
	MeanMs    float64  `json:"mean_ms,omitempty"`
	MinMs     float64  `json:"min_ms,omitempty"`
	MaxMs     float64  `json:"max_ms,omitempty"`
	EnqP50Ms  float64  `json:"enqueue_p50_ms,omitempty"`
	// D -vs-floor: the commit floor's p50 and p99 (floor.go), sampled in
	// turns with the queue's in the same run, the queue's p50 and p99 less
	// them, and the queue's p99 over the floor's.
	FloorP50Ms     *float64       `json:"floor_p50_ms,omitempty"`
	FloorP99Ms     *float64       `json:"floor_p99_ms,omitempty"`
	OverFloorP50Ms *float64       `json:"over_floor_p50_ms,omitempty"`
	OverFloorP99Ms *float64       `json:"over_floor_p99_ms,omitempty"`
	P99OverFloor   *float64       `json:"p99_over_floor,omitempty"`
	PayloadSize    int            `json:"payload_bytes"`
	PeakRSSMiB     float64        `json:"peak_rss_mib"`
	Settings       map[string]any `json:"settings"`
	GoVersion      string         `json:"go"`
	Error          string         `json:"error,omitempty"`
	// EventsDropped (C) counts events the queue dropped during the drain
	// because OnEvent's goroutine fell behind; the end was then found by
	// reading the table, which costs up to 5 ms more than the event.
	EventsDropped uint64 `json:"events_dropped,omitempty"`
	// Limits is scenario L's figures (limits.go).
	Limits *LimitsResult `json:"limits,omitempty"`
	// WriteBytes is what the process wrote to the device from the start
	// of the timed part through Close (its final checkpoint included), and
	// WriteBytesPerJob that over the jobs enqueued (A, B, E), drained (C)
	// or sampled (D). Absent where the OS has no counter: IOCounters says
	// where they come from, or why they are absent.
	WriteBytes       *int64   `json:"write_bytes,omitempty"`
	WriteBytesPerJob *float64 `json:"write_bytes_per_job,omitempty"`
	IOCounters       string   `json:"io_counters"`
	// WakeupsPerS (scenario idle) is how often the idle process's threads
	// were put on a CPU, per second.
	WakeupsPerS *float64 `json:"wakeups_per_s,omitempty"`
	// Growth (-prefill, growth.go): how long the direct inserts took, the
	// Open of the filled store and one Stats call.
	PrefillS float64 `json:"prefill_s,omitempty"`
	OpenMs   float64 `json:"open_ms,omitempty"`
	StatsMs  float64 `json:"stats_ms,omitempty"`
}

type config struct {
	scenario     string
	n            int
	workers      int
	producers    int
	maxDur       time.Duration
	pragmas      []string
	gap, gapMin  time.Duration
	seed         uint64
	dir          string
	keep         bool
	setupChunk   int
	claimBatch   int
	cpuProfile   string
	memProfile   string
	payloadBytes int
	store        string // sqlite | postgres
	pgURL        string // -pg: admin URL (postgres)
	commitFloor  bool   // D: time a bare INSERT commit instead of the queue (pg.go, floor.go)
	crossProcess bool   // D: enqueue from another process (crossproc.go)
	vsFloor      bool   // D: sample the commit floor in turns with the queue (floor.go)
	idle         time.Duration
	prefill      int    // growth: rows added before the scenario (growth.go)
	prefillAs    string // growth: what they are
}

// bench is one run: the queue, its events and the handler of the moment.
type bench struct {
	c       *config
	q       *litequeue.Queue
	opts    litequeue.Options
	handler atomic.Pointer[func(*benchJob)]

	succeeded atomic.Int64
	doneN     int64         // close allDone when succeeded reaches it (C)
	allDone   chan struct{} // C
	badMu     sync.Mutex
	bad       error  // first event that must not happen in a benchmark
	pg        *pgRun // -store postgres
	path      string // the queue file (-store sqlite)
	base      [3]int // growth: the prefilled jobs, as counts returns them

	ioFrom  int64 // write_bytes at the start of the timed part
	ioOK    bool  // ioFrom was read
	ioJobs  int64 // the jobs the written bytes are divided by
	ioTaken bool
}

// startIO notes the write counter at the start of the timed part, for jobs
// jobs.
func (b *bench) startIO(jobs int) {
	b.ioFrom, b.ioOK = writeBytes()
	b.ioJobs, b.ioTaken = int64(jobs), true
}

// finishIO sets res's write figures once the queue is closed.
func (b *bench) finishIO(res *Result) {
	if !b.ioTaken || !b.ioOK || b.ioJobs == 0 {
		return
	}
	to, ok := writeBytes()
	if !ok {
		return
	}
	n := to - b.ioFrom
	per := math.Round(float64(n)/float64(b.ioJobs)*10) / 10
	res.WriteBytes, res.WriteBytesPerJob = &n, &per
}

func (b *bench) onEvent(e litequeue.Event) {
	switch e.Type {
	case litequeue.EventSucceeded:
		if b.succeeded.Add(1) == b.doneN && b.allDone != nil {
			close(b.allDone)
		}
	case litequeue.EventRetrying, litequeue.EventDead, litequeue.EventStale:
		b.badMu.Lock()
		if b.bad == nil {
			b.bad = fmt.Errorf("job %d: unexpected %s event: %v", e.JobID, e.Type, e.Err)
		}
		b.badMu.Unlock()
	}
}

func (b *bench) failure() error {
	b.badMu.Lock()
	defer b.badMu.Unlock()
	return b.bad
}

func queueConfig(workers int) litequeue.QueueConfig {
	qc := litequeue.NewQueueConfig(litequeue.DefaultQueue)
	qc.Concurrency = workers
	return qc
}

// counts sums the queue's jobs by state over every queue.
func (b *bench) counts(ctx context.Context) (queued, running, other int, err error) {
	stats, err := b.q.Stats(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("stats: %w", err)
	}
	for _, s := range stats {
		queued += s.Ready + s.Scheduled
		running += s.Running
		other += s.Completed + s.Dead
	}
	return queued - b.base[0], running - b.base[1], other - b.base[2], nil
}

type hit struct {
	id int
	at time.Time
}

// gaps returns D's idle-gap generator: gapmin+U[0,gap), from a PCG seeded
// with -seed, so that every D run of one seed sleeps the same sequence.
func (c *config) gaps() func() time.Duration {
	rng := rand.New(rand.NewPCG(c.seed, c.seed^0x9e3779b97f4a7c15))
	return func() time.Duration {
		sleep := c.gapMin
		if c.gap > 0 {
			sleep += time.Duration(rng.Int64N(int64(c.gap)))
		}
		return sleep
	}
}

// latencies sets res's completed count and latency figures from lat (ms).
func latencies(res *Result, lat []float64) {
	res.Completed = int64(len(lat))
	sort.Float64s(lat)
	p50, p99 := round3(pct(lat, 50)), round3(pct(lat, 99))
	res.P50Ms, res.P99Ms = &p50, &p99
	res.MinMs, res.MaxMs = round3(lat[0]), round3(lat[len(lat)-1])
	var sum float64
	for _, v := range lat {
		sum += v
	}
	res.MeanMs = round3(sum / float64(len(lat)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// pct is the nearest-rank percentile of a sorted slice.
func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}
