package litequeue_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
)

// TestClaimWritesItsProcessOnTheRowsOwnPage checks that naming the claiming
// process on the row costs no page: Start writes the registry's row
// (lq_processes), and the claim of a job then writes the pages it did
// before the process column (the lq_jobs leaf, the lq_jobs_kind_due leaf
// and lq_counts), once each.
func TestClaimWritesItsProcessOnTheRowsOwnPage(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1, Pragmas: []string{"wal_autocheckpoint(0)"}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	side, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	if _, err := q.Enqueue(ctx, edgeJob{}, nil); err != nil {
		t.Fatal(err)
	}
	var busy, log, done int
	if err := side.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done); err != nil || busy != 0 {
		t.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
	running := make(chan struct{})
	release := make(chan struct{})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[edgeJob]) error {
		close(running)
		<-release
		return nil
	})
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(release)
		_ = q.Stop(ctx)
	}()
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not start")
	}
	byPage := map[uint32]string{}
	rows, err := side.Query("SELECT name, pageno FROM dbstat")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		var p uint32
		if err := rows.Scan(&n, &p); err != nil {
			t.Fatal(err)
		}
		byPage[p] = n
	}
	rows.Close()
	var got []string
	for _, p := range walPages(t, path) {
		got = append(got, byPage[p])
	}
	slices.Sort(got)
	if want := []string{"lq_counts", "lq_jobs", "lq_jobs_kind_due", "lq_processes"}; !slices.Equal(got, want) {
		t.Fatalf("Start and the claim wrote the pages of %q, want one each of %q", got, want)
	}
}
