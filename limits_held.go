package litequeue

import (
	"context"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Jobs held by a limit: ready jobs that a claim would not take now
// because of their queue's flow-control limits (limits_wait.go), for the
// test kit's idea of a busy queue.

// heldMax is the most ready jobs of one limited queue heldByLimits
// examines: a test kit's queue holds far fewer.
const heldMax = 10000

// heldByLimits returns how many ready jobs of the handled pairs are held
// by their queue's limits at now, and the earliest time after now when a
// limited claim of one of those queues may take more (ok false: none).
func (q *Queue) heldByLimits(ctx context.Context, handled []store.Handled, now int64) (held int, next time.Time, ok bool, err error) {
	ls, err := q.store.Limits(ctx)
	if err != nil || len(ls) == 0 {
		return 0, time.Time{}, false, err
	}
	kinds := map[string][]string{}
	for _, h := range handled {
		if _, limited := ls[h.Queue]; limited {
			kinds[h.Queue] = append(kinds[h.Queue], h.Kind)
		}
	}
	for queue, ks := range kinds {
		n := 0
		for _, kind := range ks {
			rows, err := q.store.Jobs(ctx, store.JobFilter{Queue: queue, Kind: kind, States: []store.ListState{store.ListReady},
				Order: store.NextDue, Limit: heldMax, Now: now})
			if err != nil {
				return 0, time.Time{}, false, err
			}
			for _, j := range rows {
				f, err := q.store.WaitFacts(ctx, queue, j.ID, now)
				if err != nil {
					return 0, time.Time{}, false, err
				}
				if waitOf(f, j.ID, StateReady, j.Attempt, time.Unix(0, j.VisibleAt), now) != nil {
					n++
				}
			}
		}
		if n == 0 {
			continue
		}
		held += n
		at, fok, err := q.store.LimitsNextFree(ctx, queue, ks, now)
		if err != nil {
			return 0, time.Time{}, false, err
		}
		if fok && (!ok || time.Unix(0, at).Before(next)) {
			next, ok = time.Unix(0, at), true
		}
	}
	return held, next, ok, nil
}
