package litequeue_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/litequeue/litequeue"
)

// TestEdgePragmasSetANewFilesPageSizeOnly: a file created with the edge
// profile has 1 KiB pages; an existing file opened with it keeps its own
// page size and opens as before.
func TestEdgePragmasSetANewFilesPageSizeOnly(t *testing.T) {
	ctx := context.Background()
	pageSize := func(path string, pragmas []string) string {
		t.Helper()
		q, err := litequeue.Open(path, &litequeue.Options{Pragmas: pragmas})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if _, err := q.Enqueue(ctx, edgeJob{}, nil); err != nil {
			t.Fatal(err)
		}
		p, err := q.Pragmas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p["page_size"]
	}
	dir := t.TempDir()
	if got := pageSize(filepath.Join(dir, "edge.db"), litequeue.EdgePragmas()); got != "1024" {
		t.Errorf("a new file with EdgePragmas has page_size %s, want 1024", got)
	}
	old := filepath.Join(dir, "old.db")
	if got := pageSize(old, nil); got != "4096" {
		t.Fatalf("a new file without it has page_size %s, want 4096", got)
	}
	if got := pageSize(old, litequeue.EdgePragmas()); got != "4096" {
		t.Errorf("an existing 4 KiB file opened with EdgePragmas has page_size %s, want 4096 (unchanged)", got)
	}
}

type edgeJob struct{}

func (edgeJob) Kind() string { return "edge_job" }
