package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnection backoff of the listening connection.
const (
	listenFirstBackoff = 50 * time.Millisecond
	listenMaxBackoff   = 5 * time.Second
)

// Keys of the store's log records.
const (
	logSchema       = "schema"
	logPollInterval = "poll_interval"
)

// probeWait is how long after its probe notification was committed the
// listening connection may go without any notification before the queue
// takes it for deaf (see listen).
const probeWait = time.Second

// probePrefix starts the payload of a probe notification; queue names are
// the payload of the others, and hold no control character.
const probePrefix = "\x01litequeue probe"

// backstop is how long the listening connection may stay silent before the
// queue looks for work anyway: at least a second, five poll intervals when
// those are longer. A notification can be lost without the connection
// failing — a pooling proxy in transaction mode never passes them on, and a
// connection whose peer vanished stays silent until TCP gives up on it —
// and a job must not wait for that.
func backstop(interval time.Duration) time.Duration {
	return max(5*interval, time.Second)
}

// Watch implements store.Runtime with LISTEN on a connection of its own:
// every insert, release, retry, requeue and follow-up notifies the schema's
// channel when it commits, and each notification calls wake. While that
// connection is lost, wake is called every interval (a fallback poll) and
// the connection is re-made with backoff; once it listens again, wake is
// called once more for what was written meanwhile. While it listens, wake
// is also called after each backstop(interval) without a notification, in
// case one was lost.
//
// A connection can listen and still never hear: through a pooler in
// transaction mode the LISTEN lands on a server connection that goes back
// to the pool. So each time it listens, the store sends a probe
// notification from another connection; if nothing at all arrives within
// probeWait of its commit, the connection is taken for deaf, a warning is
// logged, and wake is called every interval, as while the connection is
// lost, until a notification arrives. Watch returns once the channel is
// listened to (or, when that failed, once the fallback poll runs).
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
		s.listenOn(ctx, func(c *pgx.Conn) error {
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
			// Until a notification arrives: the probe's deadline, or zero
			// when the probe could not be sent (nothing to conclude).
			deadline := s.probe(ctx)
			heard, deaf := false, false
			for {
				wait := quiet
				if !heard && !deaf && !deadline.IsZero() {
					wait = max(min(wait, time.Until(deadline)), 0)
				}
				// A deadline interrupts the read without closing the
				// connection (pgconn keeps it on a timeout).
				wctx, cancel := context.WithTimeout(ctx, wait)
				n, err := c.WaitForNotification(wctx)
				cancel()
				if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) || c.IsClosed()) {
					return err
				}
				if err == nil {
					if !heard {
						heard = true
						if deaf {
							deaf, quiet = false, backstop(interval)
							s.log.Info("litequeue: notifications reach the listening connection again; the queue stops polling", logSchema, s.schema)
						}
					}
					if strings.HasPrefix(n.Payload, probePrefix) {
						continue
					}
				} else if wait < quiet && !heard && !deaf {
					if time.Until(deadline) > 0 {
						continue
					}
					deaf, quiet = true, interval
					if s.listenCfg != nil {
						s.log.Warn("litequeue: the listening connection of Options.ListenURL receives no notifications, not even its own probe: does it reach the server the queue's pool writes to, not a pooler in transaction mode or another server? The queue polls for work every PollInterval instead",
							logSchema, s.schema, logPollInterval, interval)
					} else {
						s.log.Warn("litequeue: the listening connection receives no notifications, not even its own probe (a pooler in transaction mode?); the queue polls for work every PollInterval instead. For wake-ups within milliseconds, set Options.ListenURL to a direct connection to the database, or use a pooler in session mode",
							logSchema, s.schema, logPollInterval, interval)
					}
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

// probe sends, from a connection of the pool, a probe notification (a
// payload starting with probePrefix, which wakes nobody) on the schema's
// channel, and returns when the listening connection should have heard
// something: probeWait after the probe committed. A probe that failed
// returns the zero time.
func (s *pgStore) probe(ctx context.Context) time.Time {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.db.ExecContext(pctx, `SELECT pg_notify($1, $2)`, s.channel, probePrefix); err != nil {
		return time.Time{}
	}
	return time.Now().Add(probeWait)
}

// checkListenURL parses url (Options.ListenURL) and connects once to check
// that it reaches database, the pool's: a notification is delivered only
// within its database. A url that reaches a database of the same name on
// another server passes; the probe then hears nothing, and the queue warns
// and polls.
func checkListenURL(ctx context.Context, url, database string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("litequeue: Options.ListenURL: %w", err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("litequeue: Options.ListenURL: %w", explainConnect(err))
	}
	defer c.Close(context.Background())
	var there string
	if err := c.QueryRow(ctx, `SELECT current_database()`).Scan(&there); err != nil {
		return nil, fmt.Errorf("litequeue: Options.ListenURL: %w", err)
	}
	if there != database {
		return nil, fmt.Errorf("%w: it reaches database %q, the queue is in %q; notifications stay within their database, so point ListenURL at %q", ErrListenElsewhere, there, database, database)
	}
	return cfg, nil
}

// listenOn runs fn on the listening connection: a connection of its own
// to Options.ListenURL when one was given, else one of the pool's.
func (s *pgStore) listenOn(ctx context.Context, fn func(c *pgx.Conn) error) error {
	if s.listenCfg == nil {
		return s.withConn(ctx, fn)
	}
	c, err := pgx.ConnectConfig(ctx, s.listenCfg)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return fn(c)
}
