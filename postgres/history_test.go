package postgres

import (
	"context"
	"testing"

	"github.com/litequeue/litequeue/internal/store"
)

// A success deletes the history of a job that has some — whichever write
// made it (a retry, a snooze, a burial that was requeued), and whether the
// success is batched (Complete) or in the application's transaction
// (CompleteTx) — and leaves every other job's history alone.
func TestASuccessDeletesTheHistoryWhateverWroteIt(t *testing.T) {
	s, _, admin := newTestStore(t)
	ctx := context.Background()
	history := func(id int64) int {
		t.Helper()
		var n int
		if err := admin.QueryRow(`SELECT count(*) FROM `+quoteIdent(s.schema)+`.lq_attempts WHERE job_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	got, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, ""), job("q", "a", 0, 1, ""), job("q", "a", 0, 1, ""), job("q", "a", 0, 1, "")})
	if err != nil {
		t.Fatal(err)
	}
	retried, snoozed, requeued, other := got[0], got[1], got[2], got[3]
	c := claimAll(t, s, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 4, Now: 10, Until: 100, Lease: 1})
	if len(c) != 4 {
		t.Fatalf("claimed %d", len(c))
	}
	if err := s.Retry(ctx, store.Retry{Lease: store.Lease{ID: retried, Lease: 1}, Due: 20, LastError: "x", Record: store.Attempt{Attempt: 1, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Snooze(ctx, store.Snooze{Lease: store.Lease{ID: snoozed, Lease: 1}, Due: 20, Max: 10, Record: store.Attempt{Attempt: 1, Decision: "snooze"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Bury(ctx, store.Burial{Lease: store.Lease{ID: requeued, Lease: 1}, At: 15, Reason: "r", Record: store.Attempt{Attempt: 1, Error: "y"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Retry(ctx, store.Retry{Lease: store.Lease{ID: other, Lease: 1}, Due: 20, LastError: "z", Record: store.Attempt{Attempt: 1, Error: "z"}}); err != nil {
		t.Fatal(err)
	}
	if moved, err := s.Requeue(ctx, []int64{requeued}, 18); err != nil || len(moved) != 1 {
		t.Fatalf("Requeue = %v, %v", moved, err)
	}
	for _, id := range got {
		if history(id) != 1 {
			t.Fatalf("job %d: %d history records before the successes, want 1", id, history(id))
		}
	}
	c = claimAll(t, s, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 4, Now: 30, Until: 100, Lease: 2})
	if len(c) != 4 {
		t.Fatalf("claimed %d again", len(c))
	}
	// retried and snoozed succeed in one batch; requeued in a transaction.
	done := make(chan error, 2)
	for _, id := range []int64{retried, snoozed} {
		s.Complete(store.Completion{Lease: store.Lease{ID: id, Lease: 2}, At: 40, Notify: func(err error) { done <- err }})
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteTx(ctx, store.SQLTx(tx), store.Lease{ID: requeued, Lease: 2}, 0); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{retried, snoozed, requeued} {
		if n := history(id); n != 0 {
			t.Errorf("job %d succeeded but keeps %d history records", id, n)
		}
	}
	if n := history(other); n != 1 {
		t.Errorf("job %d still runs: %d history records, want 1", other, n)
	}
}
