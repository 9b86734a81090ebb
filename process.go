package litequeue

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// The processes registry: each started queue registers itself in the
// database (host, pid, start time, the queues and kinds it works, the
// library version) and writes a heartbeat every Options.HeartbeatInterval,
// so that an operator sees which processes work the queues, which died
// (kill -9, a lost host) and the jobs they held. Each claim writes the
// process's id on the rows it takes, and each attempt's record names the
// process that ran it.

// DeadAfterBeats is how many of its heartbeat intervals a process may miss
// before Processes reports it dead.
const DeadAfterBeats = 3

// ProcessInfo is one process in the registry: a queue that was started
// (Queue.Start) and has not stopped cleanly.
type ProcessInfo struct {
	// ID is random, drawn at each Start; claims write it on the jobs they
	// take (JobInfo.Process) and attempts record it (AttemptRecord.Process).
	ID   int64  `json:"id"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// StartedAt is when Start ran; HeartbeatAt the last heartbeat, written
	// every HeartbeatInterval (the process's Options.HeartbeatInterval).
	StartedAt         time.Time      `json:"started_at"`
	HeartbeatAt       time.Time      `json:"heartbeat_at"`
	HeartbeatInterval time.Duration  `json:"heartbeat_interval"`
	Queues            []ProcessQueue `json:"queues"`
	// Version is the litequeue module version the process was built with,
	// "" when the binary does not say (a build inside the module itself).
	Version string `json:"version,omitempty"`
	// Running is how many jobs the process held at its last heartbeat, and
	// Jobs the ids of up to 100 of them: for a dead process, the jobs it
	// held when it died (their leases lapse and other processes run them
	// again).
	Running int     `json:"running"`
	Jobs    []int64 `json:"jobs,omitempty"`
	// Alive is false once the last heartbeat is more than DeadAfterBeats
	// intervals old (by the reading queue's Clock).
	Alive bool `json:"alive"`
}

// ProcessQueue is one queue a process works and the kinds it handles there.
type ProcessQueue struct {
	Name  string   `json:"name"`
	Kinds []string `json:"kinds"`
}

// MarshalJSON writes HeartbeatInterval as a Go duration string, as every
// duration in the package's JSON.
func (p ProcessInfo) MarshalJSON() ([]byte, error) {
	type plain ProcessInfo
	return json.Marshal(struct {
		plain
		HeartbeatInterval string `json:"heartbeat_interval"`
	}{plain(p), p.HeartbeatInterval.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *ProcessInfo) UnmarshalJSON(data []byte) error {
	type plain ProcessInfo
	var v struct {
		plain
		HeartbeatInterval string `json:"heartbeat_interval"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*p = ProcessInfo(v.plain)
	if v.HeartbeatInterval != "" {
		d, err := time.ParseDuration(v.HeartbeatInterval)
		if err != nil {
			return err
		}
		p.HeartbeatInterval = d
	}
	return nil
}

// Processes lists the registered processes, oldest start first, alive or
// dead: every queue started on the database (this one included while it
// runs) that has not stopped cleanly, except dead ones whose last
// heartbeat is older than the live processes' Options.ProcessRetention. A
// read-only queue reads them too; a file whose schema predates the
// registry has none.
func (q *Queue) Processes(ctx context.Context) ([]ProcessInfo, error) {
	ps, err := q.store.Processes(ctx)
	if err != nil {
		return nil, wrapf("litequeue: processes: %w", err)
	}
	now := q.clock.Now()
	out := make([]ProcessInfo, 0, len(ps))
	for _, p := range ps {
		out = append(out, processInfo(p, now))
	}
	return out, nil
}

// ProcessID returns the id under which the running queue registered itself
// (see Processes), 0 when it is not started.
func (q *Queue) ProcessID() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.run == nil {
		return 0
	}
	return q.run.proc.ID
}

// processInfo converts a registry row; now tells alive from dead.
func processInfo(p store.Process, now time.Time) ProcessInfo {
	info := ProcessInfo{ID: p.ID, Host: p.Host, PID: p.PID, StartedAt: time.Unix(0, p.StartedAt),
		HeartbeatAt: time.Unix(0, p.HeartbeatAt), HeartbeatInterval: time.Duration(p.Interval),
		Version: p.Version, Running: p.Running}
	var queues map[string][]string
	_ = json.Unmarshal([]byte(p.Queues), &queues) // written by processRow; a damaged row shows no queues
	for _, name := range slices.Sorted(maps.Keys(queues)) {
		info.Queues = append(info.Queues, ProcessQueue{Name: name, Kinds: queues[name]})
	}
	_ = json.Unmarshal([]byte(p.Held), &info.Jobs)
	info.Alive = now.Sub(info.HeartbeatAt) <= DeadAfterBeats*info.HeartbeatInterval
	return info
}

// processRow is the registry row of a run of q whose pools are r's; its
// heartbeat fields are filled at each beat.
func processRow(q *core, r *runState) store.Process {
	queues := map[string][]string{}
	for name, p := range r.pools {
		queues[name] = p.kindList
	}
	qj, _ := json.Marshal(queues)
	host, _ := os.Hostname()
	return store.Process{ID: rand.Int64N(1<<53) + 1, Host: host, PID: os.Getpid(), StartedAt: q.clock.Now().UnixNano(),
		Interval: int64(q.opts.HeartbeatInterval), Queues: string(qj), Version: moduleVersion()}
}

// moduleVersion is the litequeue module's version in the running binary's
// build information, "" when it has none.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	const path = "github.com/litequeue/litequeue"
	if bi.Main.Path == path {
		return cleanVersion(bi.Main.Version)
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			return cleanVersion(m.Version)
		}
	}
	return ""
}

func cleanVersion(v string) string {
	if v == "(devel)" {
		return ""
	}
	return v
}

// stamp names r's process in the record of an attempt it ran (none for
// a pool outside a run: the test kit's Work).
func (r *runState) stamp(a store.Attempt) store.Attempt {
	if r == nil {
		return a
	}
	a.Process, a.Host, a.PID = r.proc.ID, r.proc.Host, r.proc.PID
	return a
}

// procID is the id of r's process, 0 outside a run.
func (r *runState) procID() int64 {
	if r == nil {
		return 0
	}
	return r.proc.ID
}

// beat writes r's heartbeat: the time, the jobs its pools hold, and deletes
// the rows of processes dead for longer than the retention.
func (r *runState) beat(ctx context.Context) error {
	q := r.q
	now := q.clock.Now()
	p := r.proc
	p.HeartbeatAt = now.UnixNano()
	var held []int64
	for _, pl := range r.pools {
		for _, d := range pl.claimed() {
			p.Running++
			if len(held) < store.HeldMax {
				held = append(held, d.id)
			}
		}
	}
	slices.Sort(held)
	b := []byte{'['}
	for i, id := range held {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	p.Held = string(append(b, ']'))
	return q.store.Beat(ctx, p, now.Add(-q.opts.ProcessRetention).UnixNano())
}

// startHeartbeat sets the alarm of r's next heartbeat, one interval after
// the first (written by Start), before Start returns, and starts the loop
// that writes them.
func (r *runState) startHeartbeat() {
	a := newAlarm(r.q.clock)
	a.set(r.q.clock.Now().Add(r.q.opts.HeartbeatInterval), false)
	r.keep.Add(1)
	go r.heartbeat(a)
}

// heartbeat writes r's heartbeat every HeartbeatInterval until its handlers
// have returned or been released (Stop then removes the row). The alarm is
// set again after each beat, from the clock's time then, so a mock clock
// moved far ahead gives one beat, not one per interval skipped.
func (r *runState) heartbeat(a *alarm) {
	defer r.keep.Done()
	defer a.stop()
	q := r.q
	for {
		select {
		case <-r.settled:
			return
		case <-a.C:
		}
		if err := r.beat(context.Background()); err != nil {
			q.log.Error("litequeue: writing the process heartbeat", LogError, err.Error())
		}
		a.set(q.clock.Now().Add(q.opts.HeartbeatInterval), false)
	}
}
