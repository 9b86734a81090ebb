package litequeue_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
)

// walPages returns the page numbers of the frames in path's WAL (its
// 32-byte header, then frames of a 24-byte header and a page each).
func walPages(t *testing.T, path string) []uint32 {
	t.Helper()
	b, err := os.ReadFile(path + "-wal")
	if err != nil || len(b) < 32 {
		return nil
	}
	size := int(binary.BigEndian.Uint32(b[8:12]))
	var pages []uint32
	for off := 32; off+24+size <= len(b); off += 24 + size {
		pages = append(pages, binary.BigEndian.Uint32(b[off:off+4]))
	}
	return pages
}

// TestPagesWrittenPerJob counts the pages each kind of commit writes to the
// WAL, the bytes a job costs the device: a one-at-a-time enqueue writes
// four (the lq_jobs leaf, the lq_jobs_kind_due leaf, sqlite_sequence, which
// AUTOINCREMENT updates so that no id is ever reused, and lq_counts, the
// counts by queue and state that Stats reads, once per transaction), and no
// other index. A new index every enqueue updates, or a second write of the row,
// fails it. The drain's pages per job are logged (they depend on how many
// jobs each claim and completion batch holds).
func TestPagesWrittenPerJob(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	// No automatic checkpoints: every page a commit writes stays in the WAL.
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
	// checkpoint empties the WAL; names maps pages to their b-trees.
	checkpoint := func() {
		t.Helper()
		var busy, log, done int
		if err := side.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done); err != nil || busy != 0 {
			t.Fatalf("checkpoint: busy %d, %v", busy, err)
		}
	}
	names := func(pages []uint32) []string {
		t.Helper()
		byPage := map[uint32]string{}
		rows, err := side.Query("SELECT name, pageno FROM dbstat")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			var p uint32
			if err := rows.Scan(&n, &p); err != nil {
				t.Fatal(err)
			}
			byPage[p] = n
		}
		var out []string
		for _, p := range pages {
			out = append(out, byPage[p])
		}
		slices.Sort(out)
		return out
	}
	// 1,050 jobs: the index leaves then have room for the three enqueues
	// below, none of which splits a leaf (a split writes more pages).
	var items []litequeue.BatchItem
	for range 1050 {
		items = append(items, litequeue.BatchItem{Job: edgeJob{}})
	}
	if _, err := q.EnqueueBatch(ctx, items); err != nil {
		t.Fatal(err)
	}
	checkpoint()

	for i := range 3 {
		if _, err := q.Enqueue(ctx, edgeJob{}, nil); err != nil {
			t.Fatal(err)
		}
		got := names(walPages(t, path))
		if want := []string{"lq_counts", "lq_jobs", "lq_jobs_kind_due", "sqlite_sequence"}; !slices.Equal(got, want) {
			t.Fatalf("enqueue %d wrote the pages of %q, want one each of %q", i, got, want)
		}
		checkpoint()
	}

	done := make(chan struct{}, 2000)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[edgeJob]) error {
		done <- struct{}{}
		return nil
	})
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range len(items) + 3 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the drain did not finish")
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := q.Stop(sctx); err != nil { // writes the last successes
		t.Fatal(err)
	}
	pages := walPages(t, path)
	t.Logf("a drain of %d jobs wrote %d pages to the WAL: %.3f per job", len(items)+3, len(pages), float64(len(pages))/float64(len(items)+3))
}
