package litequeue

import (
	"context"
	"sync/atomic"
	"testing"
)

type benchExport struct {
	N int `json:"n"`
}

func (benchExport) Kind() string { return "bench_export" }

// BenchmarkEnqueueUnique is one Enqueue per job (DurabilityProcess) of
// distinct payloads, plain and unique by payload: the cost of the hash, the
// twin lookup and the unique index.
func BenchmarkEnqueueUnique(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts *EnqueueOptions
	}{{"plain", nil}, {"unique", &EnqueueOptions{Unique: &UniqueOptions{}}}} {
		b.Run(tc.name, func(b *testing.B) {
			q := openBench(b, DurabilityProcess, nil)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if _, err := q.Enqueue(ctx, benchExport{N: i}, tc.opts); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkSetProgress is a handler's hot loop of progress reports: one
// report per iteration, coalesced into one write per ProgressInterval.
// writes/op says how many reached the database.
func BenchmarkSetProgress(b *testing.B) {
	var writes atomic.Int64
	q := openBench(b, DurabilityProcess, func(e Event) {
		if e.Type == EventProgress {
			writes.Add(1)
		}
	})
	done := make(chan struct{})
	Register(q, func(ctx context.Context, d *Delivery[benchExport]) error {
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := d.SetProgress(float64(i)/float64(b.N), "rows"); err != nil {
				b.Error(err)
			}
		}
		b.StopTimer()
		close(done)
		return nil
	})
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, benchExport{}, nil); err != nil {
		b.Fatal(err)
	}
	<-done
	if err := q.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
}
