package postgres

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/litequeue/litequeue/internal/store"
)

// The store's type and what each of its parts uses: schema-qualified
// statements, the writable check, transactions of its own and their
// notifications.

// pgStore is the PostgreSQL implementation of store.Backend.
type pgStore struct {
	db       *sql.DB
	owned    bool // Close closes db
	readOnly bool
	// asyncAll (DurabilityProcess) makes every write transaction commit
	// without waiting for the WAL flush (asyncCommitSQL), set per
	// transaction so that it passes a pooler in transaction mode.
	asyncAll bool
	schema   string
	database string                    // current_database() of db's connections
	lastTx   atomic.Pointer[checkedTx] // the last application transaction checkTx found on database
	channel  string                    // LISTEN/NOTIFY channel of the schema's queues
	// listenCfg, when set (Options.ListenURL), is where the listening
	// connection connects instead of taking one of db's.
	listenCfg *pgx.ConnConfig

	qual  *strings.Replacer
	qmu   sync.RWMutex
	qualQ map[string]string

	// Three writers (internal/groupcommit), each batching its ops into one
	// round trip and one commit, and working at the same time as the others
	// on connections of their own: claims (one batch at a time, so hand-offs
	// follow commit order), inserts, and the outcomes of deliveries
	// (successes, retries, burials, releases, extensions). Inserts stay one
	// batch at a time too: they notify, and PostgreSQL serializes the commits
	// of notifying transactions; measured, two or more batches in flight
	// split 16 producers' enqueues into smaller batches and ran 15-60%
	// slower, with the notify or without it.
	claims, ins, fin *writer
	// onBatch, when set (by tests), sees each batch's statements before it
	// is sent.
	onBatch func(sqls []string)
	// log gets the store's own warnings: the queue's Options.Logger (set
	// before the queue starts), discarding by default.
	log *slog.Logger

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	watchers  sync.WaitGroup
	stopWatch context.CancelFunc
	watchCtx  context.Context
}

var (
	_ store.Backend = (*pgStore)(nil)
	_ store.Testing = (*pgStore)(nil)
)

// q returns query with its table names qualified by the store's schema.
func (s *pgStore) q(query string) string {
	s.qmu.RLock()
	r, ok := s.qualQ[query]
	s.qmu.RUnlock()
	if ok {
		return r
	}
	r = s.qual.Replace(query)
	s.qmu.Lock()
	if len(s.qualQ) < 256 {
		s.qualQ[query] = r
	}
	s.qmu.Unlock()
	return r
}

func (s *pgStore) closing() bool { return s.closed.Load() }

func (s *pgStore) writable() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if s.readOnly {
		return store.ErrReadOnly
	}
	return nil
}

// inTx runs fn in a transaction of its own, committed when fn returns nil.
func (s *pgStore) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if s.asyncAll {
		if _, err := tx.ExecContext(ctx, asyncCommitSQL); err != nil {
			tx.Rollback()
			return err
		}
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *pgStore) notifyTx(ctx context.Context, tx *sql.Tx, queues map[string]bool) error {
	for q := range queues {
		if _, err := tx.ExecContext(ctx, notifySQL, s.channel, q); err != nil {
			return err
		}
	}
	return nil
}

// checkedTx is an application transaction found on the queue's database,
// with its transaction id.
type checkedTx struct {
	tx  *sql.Tx
	xid int64
}
