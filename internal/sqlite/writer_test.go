package sqlite

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// TestACompletionCommitsBeforeAClaimOfItsBatch queues a success and a claim
// into one batch, at a time past the job's lease (a mock clock's jump, or a
// stall): the success was queued first, so it must commit first — the
// claim finds the job gone instead of taking it as lost and running it a
// second time, which would also make the success fail as stale.
func TestACompletionCommitsBeforeAClaimOfItsBatch(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "q.db"), Options{BusyTimeout: time.Second, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{{Queue: "q", Kind: "k", VisibleAt: 1, CreatedAt: 1, Payload: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	query := func(now, lease int64) store.ClaimQuery {
		return store.ClaimQuery{Queue: "q", Kinds: []string{"k"}, KindsJSON: `["k"]`, N: 10, Now: now, Until: now + 100, Lease: lease}
	}
	if n, err := s.Claim(ctx, query(10, 1), func([]store.Claimed) {}); err != nil || n != 1 {
		t.Fatalf("first claim: %d, %v", n, err)
	}

	// Hold the writer inside a transaction while the success and the claim
	// (at 500, past the lease's end at 110) queue behind it.
	entered, hold := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.w.do(ctx, func(context.Context, Execer) error {
			close(entered)
			<-hold
			return nil
		})
	}()
	<-entered
	notified := make(chan error, 1)
	s.Complete(store.Completion{Lease: store.Lease{ID: ids[0], Lease: 1}, At: 200, Notify: func(err error) { notified <- err }})
	type result struct {
		n   int
		err error
	}
	claimed := make(chan result, 1)
	go func() {
		n, err := s.Claim(ctx, query(500, 2), func([]store.Claimed) {})
		claimed <- result{n, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); s.w.gc.Queued() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the claim never queued behind the held writer")
		}
		runtime.Gosched()
	}
	close(hold)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-notified; err != nil {
		t.Fatalf("the success of the batch failed (%v): the claim of the same batch ran first and took the job", err)
	}
	r := <-claimed
	if r.err != nil || r.n != 0 {
		t.Fatalf("the claim took %d jobs (%v), want none: the job's success was queued before it", r.n, r.err)
	}
}
