package postgres

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/store"
)

// A queue file's workflow moves whole: the waiting job keeps its count of
// unmet parents and its edges, and runs on PostgreSQL after its parent.
func TestMoveFileCopiesWaitingWorkflowJobsWithTheirDependencies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var w litequeue.Workflow
	a := w.Add(moveJob{N: 1}, nil)
	w.Needs(w.Add(moveJob{N: 2}, nil), a)
	ids, err := q.EnqueueWorkflow(ctx, &w)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	u, _ := freshSchema(t)
	m, err := MoveFile(ctx, path, u)
	if err != nil {
		t.Fatal(err)
	}
	if m.Pending != 1 || m.Waiting != 1 {
		t.Fatalf("moved %+v, want 1 pending and 1 waiting", m)
	}
	s, err := openStore(ctx, u, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []store.Claimed
	if _, err := s.Claim(ctx, store.ClaimQuery{Queue: "default", Kinds: []string{"move"}, KindsJSON: `["move"]`, N: 10,
		Now: 1 << 62, Until: 1<<62 + 1, Lease: 5}, func(c []store.Claimed) { got = append(got, c...) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != ids[0] {
		t.Fatalf("claimed %+v, want only the parent %d", got, ids[0])
	}
	done := make(chan error, 1)
	s.Complete(store.Completion{Lease: store.Lease{ID: ids[0], Lease: 5}, At: 1 << 62, Flow: store.FlowParent,
		Notify: func(err error) { done <- err }})
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	j, _, err := s.Job(ctx, ids[1])
	if err != nil || j.State != store.Pending {
		t.Fatalf("child after the parent's success: %+v %v", j, err)
	}
}
