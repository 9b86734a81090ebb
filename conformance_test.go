package litequeue_test

import (
	"path/filepath"
	"testing"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/conformance"
)

// TestConformance runs the behaviour suite every backend passes on SQLite
// files, one new file per test.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Backend{
		Fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "queue.db") },
		Open: func(t *testing.T, path string, opts *litequeue.Options) (*litequeue.Queue, error) {
			return litequeue.Open(path, opts)
		},
	})
}
