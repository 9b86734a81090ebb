package litequeue

import (
	"database/sql"
	"errors"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// Open opens the queue file at name, creating it (and its schema) if it does
// not exist. A nil opts means defaults. Open refuses, leaving the file
// untouched: a directory, a FIFO, device or other file that is not a regular
// file (refused before it is opened, as is such a -wal or -shm beside the
// file), a path whose directory is missing (fs.ErrNotExist)
// or read-only (each error says so), a file this process cannot write
// (ErrReadOnly: open it with Options.ReadOnly to inspect it), a file that is
// not SQLite (ErrNotSQLite), a damaged one such as a
// truncated queue file (ErrCorrupt), another application's SQLite file
// (ErrNotLitequeue), a file of a newer schema version (ErrSchemaTooNew), a
// file whose queue tables are not the tables its schema's migrations made
// (views, other columns, triggers: ErrNotLitequeue naming the object), and,
// unless Options.ReadOnly, a file whose jobs were moved to PostgreSQL
// (ErrMoved, a *MovedError). An older schema is migrated. The file is put in
// WAL mode.
//
// An empty (0-byte) file, and a SQLite file with no tables at all, open as a
// new queue: that is what a process killed inside its first Open leaves (the
// schema is created in one transaction, so it is there whole or not at all).
func Open(name string, opts *Options) (*Queue, error) {
	o, st, err := openStore(name, opts)
	if err != nil {
		return nil, err
	}
	return withLimits(newQueue(o, st, st, o.ReadOnly))
}

// openStore checks opts and opens the SQLite store of Open; it returns
// opts with their defaults.
func openStore(name string, opts *Options) (Options, *sqlite.Store, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return o, nil, err
	}
	if o.ListenURL != "" {
		return o, nil, errListenURLOnSQLite
	}
	st, err := sqlite.Open(name, o.sqliteOptions())
	if err != nil {
		return o, nil, wrapf("%w", err)
	}
	return o, st, nil
}

// New returns a queue that keeps its tables (named lq_*) in the application's
// own SQLite database db, opened with the modernc.org/sqlite driver ("sqlite").
// Use it to enqueue inside the application's transactions (EnqueueTx) and to
// complete a job in the same transaction as the handler's writes
// (Delivery.CompleteTx).
//
// The queue keeps one connection of db for its writer, so db must allow at
// least two open connections. db's connections must have a busy timeout, so
// that the application's own writes wait for the queue's instead of failing
// at once with SQLITE_BUSY: New refuses a db whose connections have
// busy_timeout 0 (SQLite's default) and says how to set it, for example
// "file:app.db?_pragma=busy_timeout(5000)". New puts the file in WAL mode.
// Close does not close db.
func New(db *sql.DB, opts *Options) (*Queue, error) {
	o, st, err := newStore(db, opts)
	if err != nil {
		return nil, err
	}
	return withLimits(newQueue(o, st, st, false))
}

// newStore checks New's arguments and makes the SQLite store on db.
func newStore(db *sql.DB, opts *Options) (Options, *sqlite.Store, error) {
	if db == nil {
		return Options{}, nil, errors.New("litequeue: New: nil *sql.DB")
	}
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return o, nil, err
	}
	if o.ReadOnly {
		return o, nil, errors.New("litequeue: New: Options.ReadOnly applies to Open only")
	}
	if o.ListenURL != "" {
		return o, nil, errListenURLOnSQLite
	}
	st, err := sqlite.New(db, o.sqliteOptions())
	if err != nil {
		return o, nil, wrapf("%w", err)
	}
	return o, st, nil
}

// NewWithBackend returns a queue on b, a storage backend of this module
// (package postgres opens its queues with it); applications use Open, New or
// postgres.Open. A nil opts means defaults. Options.ReadOnly needs a backend
// opened read-only: the queue then refuses writes itself and keeps no
// history. NewWithBackend validates opts as Open does and starts nothing.
func NewWithBackend(b store.Backend, opts *Options) (*Queue, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.ReadOnly {
		if ro, ok := b.(interface{ ReadOnly() bool }); !ok || !ro.ReadOnly() {
			return nil, errors.New("litequeue: Options.ReadOnly needs a store opened read-only")
		}
	}
	return withLimits(newQueue(o, b, nil, o.ReadOnly))
}
