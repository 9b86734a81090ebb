package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUniqueLookupIsOneIndexSeek checks that finding a unique job's twin
// searches the partial index lq_jobs_unique, not the table.
func TestUniqueLookupIsOneIndexSeek(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "q.db"), Options{BusyTimeout: time.Second, Synchronous: "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+uniqueHolderSQL, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	got := strings.Join(plan, "; ")
	if !strings.Contains(got, "USING INDEX lq_jobs_unique (unique_key=?)") {
		t.Fatalf("the twin lookup does not seek lq_jobs_unique: %s", got)
	}
}
