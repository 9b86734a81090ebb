package litequeue

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An extension round lists the claimed jobs, then writes: a failure's
// outcome written in between leaves the row no longer held under the
// lease. That is the written outcome, not a lost lease: nothing warns,
// nothing is reported stale, and the retry stands.
func TestExtensionAfterTheOutcomeWasWrittenWarnsOfNothing(t *testing.T) {
	var logs syncBuffer
	a := setup(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(3, time.Minute)}}
	})
	release := make(chan struct{})
	Register(a.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-release
		return errors.New("smtp down")
	})
	a.start(t)
	ctx := context.Background()
	id, err := a.q.Enqueue(ctx, SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	a.ev.wait(t, EventStarted, id, 1)
	p := a.q.localPool(DefaultQueue)
	ds := p.claimed() // the round's list, taken while the handler runs
	require.Len(t, ds, 1)
	close(release)
	a.ev.wait(t, EventRetrying, id, 1)

	// The round's write, after the outcome's.
	lostIdx, err := a.q.store.Extend(ctx, leasesOf(ds), a.clock.Now().Add(time.Hour).UnixNano())
	require.NoError(t, err)
	require.Equal(t, []int{0}, lostIdx, "the written outcome let go of the lease")
	var lost []*delivery
	for _, i := range lostIdx {
		lost = append(lost, ds[i])
	}
	p.stopLost(lost)

	require.NotContains(t, logs.String(), "lease lost")
	require.Zero(t, a.ev.count(EventStale, id))
	j, err := a.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StateScheduled, j.State)
}

// Each transition leaves exactly the states it lists, for the state it
// names, and leaves every other state as it is.
func TestDeliveryTransitionsMoveOnlyFromTheirStates(t *testing.T) {
	all := []deliveryState{dQueued, dRunning, dInTx, dTxEnded, dReturned, dReleased, dLost, dCancelled}
	transitions := []struct {
		name string
		from []deliveryState
		to   deliveryState
		do   func(d *delivery) bool
	}{
		{"start", []deliveryState{dQueued}, dRunning, (*delivery).start},
		{"decideUnstarted", []deliveryState{dQueued}, dReturned, (*delivery).decideUnstarted},
		{"completeInTx", []deliveryState{dRunning}, dInTx, func(d *delivery) bool { was := d.state(); d.completeInTx(); return d.state() != was }},
		{"returned", []deliveryState{dRunning, dInTx, dTxEnded}, dReturned, func(d *delivery) bool { _, ok := d.returned(); return ok }},
		{"releaseUnstarted", []deliveryState{dQueued}, dReleased, (*delivery).releaseUnstarted},
		{"releaseBeforeOutcome", []deliveryState{dQueued, dRunning}, dReleased, (*delivery).releaseBeforeOutcome},
		{"releaseAgain", []deliveryState{dQueued, dRunning, dReleased}, dReleased, (*delivery).releaseAgain},
		{"markCancelled", []deliveryState{dQueued, dRunning, dInTx, dTxEnded}, dCancelled, (*delivery).markCancelled},
		{"markLost", []deliveryState{dQueued, dRunning}, dLost, (*delivery).markLost},
		{"txEnded", []deliveryState{dInTx}, dTxEnded, func(d *delivery) bool { was := d.state(); d.txEnded(); return d.state() != was }},
	}
	for _, tr := range transitions {
		for _, s := range all {
			d := &delivery{}
			d.st.Store(int32(s))
			moved := tr.do(d)
			leaves := setOf(tr.from...).has(s)
			if tr.to == s && leaves { // releaseAgain from released: it stays, and says so
				require.True(t, moved, "%s from %d", tr.name, s)
				require.Equal(t, s, d.state())
				continue
			}
			require.Equal(t, leaves, moved, "%s from %d", tr.name, s)
			if leaves {
				require.Equal(t, tr.to, d.state(), "%s from %d", tr.name, s)
			} else {
				require.Equal(t, s, d.state(), "%s from %d leaves it", tr.name, s)
			}
		}
	}
}
