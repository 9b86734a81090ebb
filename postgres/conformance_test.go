package postgres_test

import (
	"context"
	"testing"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/conformance"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

// TestConformance runs the behaviour suite every backend passes on
// PostgreSQL, one new schema per test.
func TestConformance(t *testing.T) {
	needQueue(t)
	conformance.Run(t, conformance.Backend{
		Fresh: func(t *testing.T) string {
			u, _ := pgtest.FreshSchema(t)
			return u
		},
		Open: func(t *testing.T, u string, opts *litequeue.Options) (*litequeue.Queue, error) {
			return postgres.Open(context.Background(), u, opts)
		},
	})
}
