package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/litequeue/litequeue/internal/store"
)

func job(queue, kind string, prio int, due int64, key string) store.NewJob {
	return store.NewJob{Queue: queue, Kind: kind, Priority: prio, VisibleAt: due, CreatedAt: due,
		Payload: []byte(fmt.Sprintf(`{"k":%q,"p":%d}`, key, prio)), Key: key}
}

func claimAll(t *testing.T, s *pgStore, q store.ClaimQuery) []store.Claimed {
	t.Helper()
	var got []store.Claimed
	n, err := s.Claim(context.Background(), q, func(c []store.Claimed) { got = append(got, c...) })
	if err != nil {
		t.Fatal(err)
	}
	if n != len(got) {
		t.Fatalf("Claim returned %d, handed off %d", n, len(got))
	}
	return got
}

func ids(cs []store.Claimed) []int64 {
	var out []int64
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func TestClaimTakesPriorityThenDueOrderAndCountsAttempts(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	jobs := []store.NewJob{
		job("q", "a", 5, 100, ""),  // 0
		job("q", "a", 1, 300, ""),  // 1
		job("q", "a", 1, 200, ""),  // 2
		job("q", "b", 0, 50, ""),   // 3: kind not claimed
		job("q", "a", 0, 9999, ""), // 4: not due
		job("other", "a", 0, 1, ""),
	}
	got, dups, err := s.Insert(ctx, store.Tx{}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range dups {
		if d != nil {
			t.Fatalf("dup %d: %v", i, d)
		}
	}
	c := claimAll(t, s, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 10, Now: 1000, Until: 2000, Lease: 7})
	want := []int64{got[2], got[1], got[0]}
	if !slices.Equal(ids(c), want) {
		t.Fatalf("claimed %v, want %v (priority, then due)", ids(c), want)
	}
	for _, cl := range c {
		if cl.Attempt != 1 || cl.Kind != "a" {
			t.Errorf("claimed %+v: want attempt 1 of kind a", cl)
		}
	}
	if c[0].DueAt != 200 || c[0].Priority != 1 {
		t.Errorf("claimed %+v: want DueAt 200, priority 1", c[0])
	}
	// Leased until 2000: nothing more to claim at 1500; at 2500 the lapsed
	// leases come back with attempt 2 and the reason.
	if c := claimAll(t, s, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 10, Now: 1500, Until: 3000, Lease: 8}); len(c) != 0 {
		t.Fatalf("claimed %v while leased", ids(c))
	}
	c = claimAll(t, s, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 2, Now: 2500, Until: 3000, Lease: 9})
	if len(c) != 2 || c[0].Attempt != 2 || c[0].LastError != "lease expired: the worker of attempt 1 was lost" {
		t.Fatalf("re-claim: %+v", c)
	}
	due, ok, err := s.NextDue(ctx, "q", []string{"a"}, "")
	if err != nil || !ok || due != 2000 {
		t.Fatalf("NextDue = %d %v %v, want 2000 (the lease still held)", due, ok, err)
	}
}

func TestInsertReportsDuplicateKeys(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	first, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, "k1")})
	if err != nil {
		t.Fatal(err)
	}
	got, dups, err := s.Insert(ctx, store.Tx{}, []store.NewJob{
		job("q", "a", 0, 1, "k1"), job("q", "a", 0, 1, "k2"), job("q", "a", 0, 1, ""), job("q", "a", 0, 1, "k2"),
	})
	if err != nil {
		t.Fatal(err)
	}
	var de *store.DuplicateError
	if !errors.As(dups[0], &de) || de.ID != first[0] || got[0] != first[0] {
		t.Errorf("item 0: %v (id %d), want a duplicate of %d", dups[0], got[0], first[0])
	}
	if dups[1] != nil || dups[2] != nil {
		t.Errorf("items 1, 2: %v %v, want inserted", dups[1], dups[2])
	}
	if !errors.As(dups[3], &de) || de.ID != got[1] || !errors.Is(dups[3], store.ErrDuplicate) {
		t.Errorf("item 3: %v, want a duplicate of item 1 (%d)", dups[3], got[1])
	}
	if !(got[1] < got[2]) {
		t.Errorf("ids %v do not follow the batch order", got)
	}
}

func TestBatchIDsFollowTheBatchOrder(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	// With keys: the merged INSERT; without: COPY, or below copyMin the
	// insert without conflicts.
	for _, c := range []struct {
		keyed bool
		n     int
	}{{true, 2000}, {false, 2000}, {false, copyMin - 1}} {
		keyed := c.keyed
		var jobs []store.NewJob
		for i := range c.n {
			k := ""
			if keyed && i%7 == 0 {
				k = fmt.Sprint("key", i%21) // every third keyed job repeats a key
			}
			j := job("q", "a", 0, 1, k)
			j.Payload = []byte(fmt.Sprint(keyed, i))
			jobs = append(jobs, j)
		}
		got, dups, err := s.Insert(ctx, store.Tx{}, jobs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range jobs {
			if dups[i] != nil {
				continue
			}
			j, _, err := s.Job(ctx, got[i])
			if err != nil {
				t.Fatal(err)
			}
			if string(j.Payload) != fmt.Sprint(keyed, i) {
				t.Fatalf("keyed %v: job %d has id %d whose payload is %s", keyed, i, got[i], j.Payload)
			}
		}
	}
}

func TestWritesAreConditionalOnTheLease(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	got, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, ""), job("q", "a", 0, 1, ""), job("q", "a", 0, 1, "")})
	if err != nil {
		t.Fatal(err)
	}
	c := claimAll(t, s, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 3, Now: 10, Until: 100, Lease: 1})
	if len(c) != 3 {
		t.Fatalf("claimed %d", len(c))
	}
	stale := store.Lease{ID: got[0], Lease: 2}
	if err := s.Retry(ctx, store.Retry{Lease: stale, Due: 50, LastError: "x"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Retry with a stale lease: %v", err)
	}
	if err := s.Bury(ctx, store.Burial{Lease: stale, At: 50, Reason: "r"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Bury with a stale lease: %v", err)
	}
	lost, err := s.Extend(ctx, []store.Lease{stale, {ID: got[1], Lease: 1}}, 500)
	if err != nil || !slices.Equal(lost, []int{0}) {
		t.Fatalf("Extend: lost %v %v, want [0]", lost, err)
	}
	// A good retry: pending again, due at 50, with its history.
	rec := store.Attempt{Attempt: 1, StartedAt: 10, FinishedAt: 20, Error: "boom", Decision: "retry", Delay: 30}
	if err := s.Retry(ctx, store.Retry{Lease: store.Lease{ID: got[0], Lease: 1}, Due: 50, LastError: "boom", Record: rec}); err != nil {
		t.Fatal(err)
	}
	j, hist, err := s.Job(ctx, got[0])
	if err != nil || j.State != store.Pending || j.VisibleAt != 50 || j.LastError != "boom" || len(hist) != 1 || hist[0] != rec {
		t.Fatalf("after Retry: %+v %+v %v", j, hist, err)
	}
	// Completion with a stale lease is reported, a good one deletes.
	var mu sync.Mutex
	res := map[int64]error{}
	note := func(id int64) func(error) {
		return func(err error) { mu.Lock(); res[id] = err; mu.Unlock() }
	}
	s.Complete(store.Completion{Lease: store.Lease{ID: got[1], Lease: 1}, At: 60, Notify: note(got[1])})
	s.Complete(store.Completion{Lease: store.Lease{ID: got[2], Lease: 9}, At: 60, Notify: note(got[2])})
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if res[got[1]] != nil || !errors.Is(res[got[2]], store.ErrLeaseLost) {
		t.Fatalf("completions: %v", res)
	}
	if _, _, err := s.Job(ctx, got[1]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("completed job still there: %v", err)
	}
	// Burial with a follow-up and a replaced error.
	msg := "lost"
	fu := job("q", "b", 0, 70, "")
	if err := s.Bury(ctx, store.Burial{Lease: store.Lease{ID: got[2], Lease: 1}, At: 70, Reason: "gave up", LastError: &msg, Attempt: 4,
		Record: store.Attempt{Attempt: 4, StartedAt: 70, FinishedAt: 70, Error: "lost", Decision: "give-up"}, FollowUp: &fu}); err != nil {
		t.Fatal(err)
	}
	j, hist, err = s.Job(ctx, got[2])
	if err != nil || j.State != store.Dead || j.DeadReason != "gave up" || j.LastError != "lost" || j.Attempt != 4 || j.FinishedAt != 70 || len(hist) != 1 {
		t.Fatalf("after Bury: %+v %+v %v", j, hist, err)
	}
	all, err := s.Jobs(ctx, store.JobFilter{Kind: "b"})
	if err != nil || len(all) != 1 {
		t.Fatalf("follow-up: %+v %v", all, err)
	}
	// Requeue brings it back, attempts reset.
	moved, err := s.Requeue(ctx, []int64{got[2]}, 80)
	if err != nil || len(moved) != 1 || moved[0].ID != got[2] {
		t.Fatalf("Requeue: %v %v", moved, err)
	}
	if _, err := s.Requeue(ctx, []int64{got[2]}, 80); !errors.Is(err, store.ErrWrongState) {
		t.Fatalf("Requeue of a pending job: %v", err)
	}
	st, err := s.Stats(ctx, 60)
	if err != nil || len(st) != 1 || st[0].Ready != 1 || st[0].Scheduled != 2 || st[0].NextDue != 70 || st[0].OldestReadySince != 50 {
		t.Fatalf("Stats: %+v %v", st, err)
	}
}

func TestConcurrentClaimsNeverShareARow(t *testing.T) {
	s, u, _ := newTestStore(t)
	ctx := context.Background()
	var jobs []store.NewJob
	for range 3000 {
		jobs = append(jobs, job("q", "a", 0, 1, ""))
	}
	if _, _, err := s.Insert(ctx, store.Tx{}, jobs); err != nil {
		t.Fatal(err)
	}
	// Three stores: three connection pools, as three processes would have.
	stores := []*pgStore{s}
	for range 2 {
		o, err := openStore(ctx, u, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		stores = append(stores, o)
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for i, st := range stores {
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var got []store.Claimed
					_, err := st.Claim(ctx, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 7, Now: 10, Until: 1 << 60, Lease: int64(i*10 + w)},
						func(c []store.Claimed) { got = c })
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, c := range got {
						seen[c.ID]++
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(seen) != 3000 {
		t.Fatalf("claimed %d distinct jobs, want 3000", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %d claimed %d times", id, n)
		}
	}
}

func TestDeletingJobsDeletesTheirHistory(t *testing.T) {
	s, _, admin := newTestStore(t)
	ctx := context.Background()
	attempts := func() int {
		var n int
		if err := admin.QueryRow(`SELECT count(*) FROM ` + quoteIdent(s.schema) + `.lq_attempts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	got, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, ""), job("q", "a", 0, 1, ""), job("q", "a", 0, 1, "")})
	if err != nil {
		t.Fatal(err)
	}
	// Each job fails once and is retried: three history records.
	c := claimAll(t, s, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 3, Now: 10, Until: 100, Lease: 1})
	for _, cl := range c {
		if err := s.Retry(ctx, store.Retry{Lease: store.Lease{ID: cl.ID, Lease: 1}, Due: 20, LastError: "x", Record: store.Attempt{Attempt: 1, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := attempts(); n != 3 {
		t.Fatalf("%d records, want 3", n)
	}
	// One succeeds, one is cancelled, one dies and is purged.
	c = claimAll(t, s, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 2, Now: 30, Until: 100, Lease: 2})
	done := make(chan error, 1)
	s.Complete(store.Completion{Lease: store.Lease{ID: c[0].ID, Lease: 2}, At: 40, Notify: func(err error) { done <- err }})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Bury(ctx, store.Burial{Lease: store.Lease{ID: c[1].ID, Lease: 2}, At: 40, Reason: "r", Record: store.Attempt{Attempt: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := cancelForTest(ctx, s, got[2]); err != nil {
		t.Fatal(err)
	}
	if n := attempts(); n != 2 && n != 3 {
		t.Fatalf("%d records after a success and a cancel, want the dead letter's 2 (and the cancelled job's, if kept)", n)
	}
	dead := []store.ListState{store.ListDead}
	if r, err := s.Bulk(ctx, store.BulkDelete, store.JobQuery{IDs: []int64{got[2]}, States: dead}, math.MaxInt64, 10, nil); err != nil || r.Changed != 0 {
		t.Fatalf("deleting the cancelled job as dead = %+v, %v", r, err)
	}
	if r, err := s.Bulk(ctx, store.BulkDelete, store.JobQuery{States: dead}, math.MaxInt64, 10, nil); err != nil || r.Changed != 1 {
		t.Fatalf("deleting the dead = %+v, %v", r, err)
	}
	if n := attempts(); n != 0 && n != 1 {
		t.Fatalf("%d records left", n)
	}
}

// The store's own rule for paused queues: a claim made after a Pause
// committed takes nothing, whatever the dispatcher above it knows, and the
// queue's jobs are claimable again once it is resumed.
func TestClaimOfAPausedQueueTakesNothing(t *testing.T) {
	s, _, _ := newTestStore(t)
	other := openOther(t, s)
	ctx := context.Background()
	if _, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("p", "a", 0, 1, ""), job("p", "a", 0, 2, "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Pause(ctx, "p", 5); err != nil {
		t.Fatal(err)
	}
	q := store.ClaimQuery{Queue: "p", Kinds: []string{"a"}, N: 10, Now: 10, Until: 100, Lease: 1}
	if got := claimAll(t, s, q); len(got) != 0 {
		t.Fatalf("claimed %v from a paused queue", ids(got))
	}
	if _, err := other.Resume(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	q.Lease = 2
	if got := claimAll(t, s, q); len(got) != 2 {
		t.Fatalf("claimed %v after the resume, want both jobs", ids(got))
	}
}
