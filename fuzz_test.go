package litequeue

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/sqlite"
)

// FuzzPayloadDecode feeds arbitrary stored payloads to a registered
// handler's decoder: it must never panic; a payload it accepts runs the
// handler with a job that survives a round trip, and a policy of at least
// one attempt. (The RetryPolicy/Backoff JSON decoder has its own fuzz
// target, with the retry contract.)
func FuzzPayloadDecode(f *testing.F) {
	for _, s := range []string{
		`{"to":"a@b.c"}`, `{"to":5}`, `{"attempts":3}`, `{"attempts":-9223372036854775808}`, `{"attempts":1e400}`,
		`null`, `[]`, `""`, ``, "\xff\xfe", `{"to":"\u0000\ud800"}`, `{"to":"x","to":"y"}`, `[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(s))
	}
	q := &Queue{handlers: map[string]*handler{}}
	q.configs = map[string]QueueConfig{}
	var ran int
	Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error { ran++; return nil })
	Register(q, func(ctx context.Context, d *Delivery[OwnPolicy]) error {
		ran++
		if d.MaxAttempts < 1 {
			return errors.New("policy below one attempt")
		}
		return nil
	})
	p := &pool{cfg: NewQueueConfig(DefaultQueue)}
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, h := range q.handlers {
			own, run, err := h.prepare(payload)
			if err != nil {
				require.Nil(t, run)
				continue
			}
			require.GreaterOrEqual(t, p.policy(own.policy).Attempts(), 1)
			ran = 0
			require.NoError(t, run(context.Background(), &delivery{p: p, kind: h.kind, payload: payload}))
			require.Equal(t, 1, ran)
			// What decoded re-encodes to a payload that decodes the same.
			_, again, err := h.prepare(mustReencode(t, h, payload))
			require.NoError(t, err)
			require.NotNil(t, again)
		}
	})
}

func mustReencode(t *testing.T, h *handler, payload []byte) []byte {
	t.Helper()
	var v any
	switch h.kind {
	case SendEmail{}.Kind():
		var j SendEmail
		require.NoError(t, json.Unmarshal(payload, &j))
		v = j
	default:
		var j OwnPolicy
		require.NoError(t, json.Unmarshal(payload, &j))
		v = j
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	back := reflect.New(reflect.TypeOf(v))
	require.NoError(t, json.Unmarshal(b, back.Interface()))
	require.Equal(t, v, back.Elem().Interface())
	return b
}

// FuzzJob is the state-machine fuzzer's job: its own policy of Attempts.
type FuzzJob struct {
	N        int `json:"n"`
	Attempts int `json:"attempts"`
}

func (FuzzJob) Kind() string { return "fuzz" }
func (j FuzzJob) RetryPolicy() *RetryPolicy {
	p := FixedRetry(j.Attempts, time.Second)
	return &p
}

// modelJob is the in-memory model of one job.
type modelJob struct {
	state    int // 0 pending, 1 running, 2 completed, 3 dead, -1 gone
	attempts int // the policy's
	lease    int64
	key      string
	// overrun: a claim past the policy (made only to bury the job) was lost
	// or released; until a claim buries it, a pending row may show that
	// claim's attempt count.
	overrun bool
}

// FuzzQueueStateMachine applies a random sequence of operations — enqueue
// with random options, claim, succeed, fail, fail permanently, let leases
// lapse, release, crash and reopen, requeue, purge, cancel — to a queue on a
// real file with a mock clock, stepping its internals one call at a time,
// and checks after every step against an in-memory model: no job lost or
// invented, attempts never above the policy, a leased job never claimable,
// every delivery write conditional on its lease.
func FuzzQueueStateMachine(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 4, 2, 0, 3, 40, 1, 4, 2, 0, 4, 5, 6, 7})
	f.Add([]byte{0, 0, 0, 9, 1, 9, 3, 35, 1, 9, 4, 1, 9, 3, 35, 1, 9, 2, 0, 5, 1, 9, 2, 1})
	f.Add([]byte{0, 17, 0, 33, 1, 2, 8, 0, 1, 2, 2, 2, 3, 31, 1, 2, 2, 0, 2, 1, 9, 0})
	f.Add([]byte{0, 2, 1, 1, 4, 1, 1, 4, 3, 30, 1, 1, 2, 0, 5, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		path := filepath.Join(t.TempDir(), "q.db")
		clk := clock.NewMock()
		clk.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		opts := &Options{Clock: clk, Rand: rand.New(rand.NewPCG(1, 1)), PollInterval: -1, CompletedRetention: time.Hour}
		var outcome error
		open := func() *Queue {
			q, err := Open(path, opts)
			require.NoError(t, err)
			Register(q, func(ctx context.Context, d *Delivery[FuzzJob]) error { return outcome })
			return q
		}
		q := open()
		defer func() { q.Close() }()
		model := map[int64]*modelJob{}
		var held []*delivery
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		ctx := context.Background()
		for len(ops) > 0 {
			switch op := next() % 10; op {
			case 0: // enqueue
				b := next()
				key := []string{"", "", "a", "b"}[b%4]
				o := &EnqueueOptions{Key: key, Priority: int(b>>2) % 3, Delay: time.Duration(b>>4%3) * 5 * time.Second}
				id, err := q.Enqueue(ctx, FuzzJob{N: len(model), Attempts: 1 + int(b>>6)}, o)
				holder := int64(0)
				for mid, m := range model {
					if key != "" && m.key == key && (m.state == 0 || m.state == 1) {
						holder = mid
					}
				}
				if holder != 0 {
					require.ErrorIs(t, err, ErrDuplicate)
					require.Equal(t, holder, id)
					break
				}
				require.NoError(t, err)
				model[id] = &modelJob{attempts: 1 + int(b>>6), key: key}
			case 1: // claim
				n := 1 + int(next()%4)
				claimable := dueRows(t, q, clk.Now())
				// Each claim as another process's would be: a pool never
				// takes a job it holds itself (it extends its own lapsed
				// leases first), and the model lets held leases lapse.
				ds := claimUpTo(t, detachedPool(q, DefaultQueue), n)
				require.LessOrEqual(t, len(ds), n)
				if len(ds) < n {
					require.Len(t, ds, len(claimable), "a claimable job was left behind")
				}
				for _, d := range ds {
					require.True(t, claimable[d.id], "claimed job %d that was not due or still leased", d.id)
					m := model[d.id]
					m.state, m.lease = 1, d.lease
					m.overrun = m.overrun || d.attempt > m.attempts
					held = append(held, d)
				}
			case 2, 8: // run a held delivery: succeed, fail, fail permanently; or release it
				if len(held) == 0 {
					break
				}
				b := next()
				i := int(b) % len(held)
				d := held[i]
				held = append(held[:i], held[i+1:]...)
				m := model[d.id]
				valid := m.state == 1 && m.lease == d.lease
				if op == 8 {
					d.p.release([]*delivery{d})
					if valid {
						m.state = 0
					}
					break
				}
				outcome = []error{nil, errors.New("fail"), Permanent(errors.New("bad"))}[int(b>>4)%3]
				d.p.execute(d)
				require.NoError(t, q.lite.Do(ctx, func(context.Context, sqlite.Execer) error { return nil })) // flush the success
				if !valid {
					break
				}
				switch {
				case d.attempt > m.attempts, outcome != nil && (d.attempt >= m.attempts || IsPermanent(outcome)):
					m.state = 3
				case outcome == nil:
					m.state = 2
				default:
					m.state = 0
				}
			case 3: // time passes; leases may lapse
				clk.Add(time.Duration(next()%40) * time.Second)
			case 4: // crash and reopen: held deliveries are lost with the process
				require.NoError(t, q.Close())
				held = nil
				q = open()
			case 5:
				_, err := q.RequeueAll(ctx, DeadFilter{})
				require.NoError(t, err)
				live := map[string]bool{}
				for _, m := range model {
					if m.key != "" && (m.state == 0 || m.state == 1) {
						live[m.key] = true
					}
				}
				for _, m := range model {
					if m.state == 3 && (m.key == "" || !live[m.key]) {
						m.state, m.overrun = 0, false
						if m.key != "" {
							live[m.key] = true
						}
					}
				}
			case 6:
				_, err := q.PurgeDead(ctx, DeadFilter{})
				require.NoError(t, err)
				for _, m := range model {
					if m.state == 3 {
						m.state = -1
					}
				}
			case 7:
				_, err := q.PurgeCompleted(ctx, 0)
				require.NoError(t, err)
				for _, m := range model {
					if m.state == 2 {
						m.state = -1
					}
				}
			case 9: // cancel a pending job: it stays, cancelled (state 4)
				for id, m := range model {
					if m.state == 0 {
						_, err := q.Cancel(ctx, id)
						require.NoError(t, err)
						m.state = 4
						break
					}
				}
			}
			checkModel(t, q, model)
		}
	})
}

// dueRows returns the ids a claim may take now: live and due (a running
// row is due once its lease lapsed).
func dueRows(t *testing.T, q *Queue, now time.Time) map[int64]bool {
	t.Helper()
	rows, err := q.lite.DB().Query(`SELECT id FROM lq_jobs WHERE state IN (0, 1) AND visible_at <= ?`, now.UnixNano())
	require.NoError(t, err)
	defer rows.Close()
	due := map[int64]bool{}
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		due[id] = true
	}
	require.NoError(t, rows.Err())
	return due
}

func checkModel(t *testing.T, q *Queue, model map[int64]*modelJob) {
	t.Helper()
	rows, err := q.lite.DB().Query(`SELECT id, state, attempt, lease FROM lq_jobs`)
	require.NoError(t, err)
	defer rows.Close()
	seen := map[int64]bool{}
	liveKeys := map[string]int64{}
	for rows.Next() {
		var id, lease int64
		var state, attempt int
		var l *int64
		require.NoError(t, rows.Scan(&id, &state, &attempt, &l))
		if l != nil {
			lease = *l
		}
		m, ok := model[id]
		require.True(t, ok, "job %d appeared from nowhere", id)
		require.NotEqual(t, -1, m.state, "job %d should be gone", id)
		require.Equal(t, m.state, state, "job %d state", id)
		seen[id] = true
		require.Equal(t, state == 1, l != nil, "job %d: a lease on a row that is not running, or the reverse", id)
		if state == 1 {
			// A running row past its policy is a claim made only to bury
			// it; if such claims die with their process the counter climbs
			// until one succeeds, which settles it at the policy's attempts.
			require.Equal(t, m.lease, lease, "job %d holds another lease than its last claim's", id)
		} else if !((state == 0 || state == 4) && m.overrun) {
			// (A pending row after an overrun claim was released keeps that
			// claim's count, and so does such a row cancelled.)
			require.LessOrEqual(t, attempt, m.attempts, "job %d: attempts above its policy", id)
		}
		if m.key != "" && (state == 0 || state == 1) {
			other, dup := liveKeys[m.key]
			require.False(t, dup, "jobs %d and %d both hold key %q", other, id, m.key)
			liveKeys[m.key] = id
		}
	}
	require.NoError(t, rows.Err())
	for id, m := range model {
		if m.state != -1 {
			require.True(t, seen[id], "job %d is lost", id)
		}
	}
}
