package litequeue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHistoryCountsOutcomesPerMinuteAndPersistsThem(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if d.Job.To == "fail" {
			return errors.New("no")
		}
		return nil
	})
	start := h.clock.Now()
	h.start(t)
	_, err := h.q.Enqueue(ctx, SendEmail{To: "ok"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventSucceeded, 0, 1)
	h.clock.Add(time.Minute)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "fail"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventDead, 0, 1)

	pts, err := h.q.History(ctx, "", start)
	require.NoError(t, err)
	require.Equal(t, []HistoryPoint{
		{Queue: DefaultQueue, Minute: start, Enqueued: 1, Succeeded: 1},
		{Queue: DefaultQueue, Minute: start.Add(time.Minute), Enqueued: 1, Dead: 1},
	}, utcPoints(pts))

	// The first minute was written when the second began; the second only on
	// FlushHistory. A reopened queue reads both from the file.
	h.q.hist.wait()
	var rows int
	require.NoError(t, h.q.lite.DB().QueryRow(`SELECT count(*) FROM lq_history`).Scan(&rows))
	require.Equal(t, 1, rows)
	require.NoError(t, h.q.FlushHistory(ctx))
	require.NoError(t, h.q.lite.DB().QueryRow(`SELECT count(*) FROM lq_history`).Scan(&rows))
	require.Equal(t, 2, rows)
	require.NoError(t, h.q.Stop(ctx))
	h.reopen(t)
	pts, err = h.q.History(ctx, DefaultQueue, start)
	require.NoError(t, err)
	require.Len(t, pts, 2)
	require.Equal(t, 1, pts[0].Succeeded)
	require.Equal(t, 1, pts[1].Dead)
	pts, err = h.q.History(ctx, "other", start)
	require.NoError(t, err)
	require.Empty(t, pts)
}

func TestHistoryRowsOlderThanTheRetentionArePruned(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	old := h.clock.Now()
	_, err := h.q.Enqueue(ctx, SendEmail{To: "a"}, nil)
	require.NoError(t, err)
	require.NoError(t, h.q.FlushHistory(ctx))
	h.clock.Add(HistoryRetention + time.Hour)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "b"}, nil)
	require.NoError(t, err)
	require.NoError(t, h.q.FlushHistory(ctx))
	pts, err := h.q.History(ctx, "", old.Add(-time.Hour))
	require.NoError(t, err)
	require.Len(t, pts, 1, "the week-old minute was deleted")
	require.Equal(t, h.clock.Now().Truncate(time.Minute).UTC(), pts[0].Minute.UTC())
}

func utcPoints(pts []HistoryPoint) []HistoryPoint {
	for i := range pts {
		pts[i].Minute = pts[i].Minute.UTC()
	}
	return pts
}
