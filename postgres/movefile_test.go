package postgres

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/store"
)

type moveJob struct {
	N int `json:"n"`
}

func (moveJob) Kind() string { return "move" }

type failJob struct{}

func (failJob) Kind() string { return "fail" }

// queueFile makes a queue file with ready, scheduled, keyed and prioritized
// jobs and one dead letter with its history; it returns the file, the live
// ids and the dead letter's id.
func queueFile(t *testing.T) (string, []int64, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	dead := make(chan int64, 1)
	q, err := litequeue.Open(path, &litequeue.Options{OnEvent: func(e litequeue.Event) {
		if e.Type == litequeue.EventDead {
			dead <- e.JobID
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	var ids []int64
	for i, o := range []*litequeue.EnqueueOptions{nil, {Delay: time.Hour}, {Key: "k1"}, {Priority: -3}} {
		id, err := q.Enqueue(ctx, moveJob{N: i}, o)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Only fail jobs have a handler: the move jobs stay where they are.
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[failJob]) error {
		return litequeue.Permanent(errors.New("no such account"))
	})
	if _, err := q.Enqueue(ctx, failJob{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := <-dead
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return path, ids, id
}

func TestMoveFileCopiesJobsDeadLettersAndHistoryOnce(t *testing.T) {
	path, live, deadID := queueFile(t)
	u, _ := freshSchema(t)
	ctx := context.Background()
	var steps []MoveStep
	m, err := MoveFileWith(ctx, path, u, &MoveOptions{Progress: func(s MoveStep) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(steps, []MoveStep{MoveMarked, MoveCopied}) {
		t.Fatalf("progress %v, want marked then copied", steps)
	}
	if m.Pending != 4 || m.Dead != 1 || m.Attempts != 1 || m.Skipped != 0 {
		t.Fatalf("moved %+v, want 4 pending, 1 dead with 1 attempt", m)
	}
	src, err := litequeue.Open(path, &litequeue.Options{ReadOnly: true, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	s, err := openStore(ctx, u, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range append(live, deadID) {
		want, err := src.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got, hist, err := s.Job(ctx, id)
		if err != nil {
			t.Fatalf("job %d not moved: %v", id, err)
		}
		if string(got.Payload) != string(want.Payload) || got.Kind != want.Kind || got.Key != want.Key ||
			got.Priority != want.Priority || got.VisibleAt != want.RunAt.UnixNano() && got.State == store.Pending ||
			got.Attempt != want.Attempt || len(hist) != len(want.Attempts) {
			t.Errorf("job %d: moved %+v (history %d), file has %+v", id, got, len(hist), want)
		}
	}
	// The id sequence continues after the file's ids.
	ids, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("default", "move", 0, 1, "")})
	if err != nil || ids[0] <= deadID {
		t.Fatalf("new job id %v (%v), want after %d", ids, err, deadID)
	}
	// The held key stays held.
	_, dups, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("default", "move", 0, 1, "k1")})
	if err != nil || !errors.Is(dups[0], store.ErrDuplicate) {
		t.Fatalf("key k1 after the move: %v %v", dups, err)
	}
	// A re-run copies nothing.
	src.Close()
	m, err = MoveFile(ctx, path, u)
	if err != nil || m.Jobs() != 0 || m.Skipped != 5 {
		t.Fatalf("re-run: %+v %v", m, err)
	}
}

func TestMoveFileRefusesWhileTheQueueRuns(t *testing.T) {
	path, _, _ := queueFile(t)
	u, admin := freshSchema(t)
	q, err := litequeue.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = MoveFile(context.Background(), path, u)
	q.Close()
	if !errors.Is(err, ErrFileInUse) {
		t.Fatalf("err = %v, want ErrFileInUse", err)
	}
	if got := tables(t, admin, schemaOf(t, u)); len(got) != 0 {
		t.Fatalf("tables written on refusal: %v", got)
	}
	if _, err := MoveFile(context.Background(), path, u); err != nil {
		t.Fatalf("after the queue closed: %v", err)
	}
}

func TestMoveFileRefusesIdsTakenInPostgreSQL(t *testing.T) {
	path, _, _ := queueFile(t)
	s, u, _ := newTestStore(t)
	ctx := context.Background()
	if _, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("default", "x", 0, 1, "")}); err != nil {
		t.Fatal(err)
	}
	_, err := MoveFile(ctx, path, u)
	if err == nil || !strings.Contains(err.Error(), "already has jobs") {
		t.Fatalf("err = %v", err)
	}
	all, _ := s.Jobs(ctx, store.JobFilter{})
	if len(all) != 1 {
		t.Fatalf("%d jobs after a refused move", len(all))
	}
}
