package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnection backoff of the listening connection.
const (
	listenFirstBackoff = 50 * time.Millisecond
	listenMaxBackoff   = 5 * time.Second
)

// backstop is how long the listening connection may stay silent before the
// queue looks for work anyway: at least a second, five poll intervals when
// those are longer. A notification can be lost without the connection
// failing — a pooling proxy in transaction mode never passes them on, and a
// connection whose peer vanished stays silent until TCP gives up on it —
// and a job must not wait for that.
func backstop(interval time.Duration) time.Duration {
	return max(5*interval, time.Second)
}

// Watch implements store.Store with LISTEN on a connection of its own:
// every insert, release, retry, requeue and follow-up notifies the schema's
// channel when it commits, and each notification calls wake. While that
// connection is lost, wake is called every interval (a fallback poll) and
// the connection is re-made with backoff; once it listens again, wake is
// called once more for what was written meanwhile. While it listens, wake
// is also called after each backstop(interval) without a notification, in
// case one was lost. Watch returns once the
// channel is listened to (or, when that failed, once the fallback poll
// runs).
func (s *pgStore) Watch(ctx context.Context, interval time.Duration, wake func()) error {
	if interval <= 0 {
		return nil
	}
	if s.closed.Load() {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.watchCtx, cancel)
	listening := make(chan struct{})
	s.watchers.Add(1)
	go func() {
		defer s.watchers.Done()
		defer stop()
		defer cancel()
		s.listen(ctx, interval, wake, listening)
	}()
	select {
	case <-listening:
	case <-ctx.Done():
	}
	return nil
}

// listen keeps a listening connection until ctx ends. It closes listening
// after the first attempt, whatever its outcome.
func (s *pgStore) listen(ctx context.Context, interval time.Duration, wake func(), listening chan struct{}) {
	signal := func() {
		select {
		case <-listening:
		default:
			close(listening)
		}
	}
	defer signal()
	backoff := listenFirstBackoff
	first := true
	for ctx.Err() == nil {
		up := false
		s.withConn(ctx, func(c *pgx.Conn) error {
			if _, err := c.Exec(ctx, "LISTEN "+quoteIdent(s.channel)); err != nil {
				return err
			}
			up = true
			backoff = listenFirstBackoff
			if !first {
				wake() // what was written while nobody listened
			}
			signal()
			quiet := backstop(interval)
			for {
				// A deadline interrupts the read without closing the
				// connection (pgconn keeps it on a timeout).
				wctx, cancel := context.WithTimeout(ctx, quiet)
				_, err := c.WaitForNotification(wctx)
				cancel()
				if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) || c.IsClosed()) {
					return err
				}
				wake()
			}
		})
		first = false
		signal()
		if ctx.Err() != nil {
			return
		}
		if up {
			wake()
		}
		// Lost (or never made): poll every interval while waiting to
		// reconnect.
		deadline := time.Now().Add(backoff)
		backoff = min(2*backoff, listenMaxBackoff)
		for {
			wait := min(interval, time.Until(deadline))
			if wait <= 0 {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if time.Until(deadline) > 0 || wait == interval {
				wake()
			}
		}
	}
}
