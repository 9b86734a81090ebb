package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrOtherDatabase: a transaction handed to Queue.EnqueueTx,
// Queue.EnqueueBatchTx or Delivery.CompleteTx is on another database than
// the queue's; nothing was written. Begin it on the *sql.DB the queue was
// made with (New).
var ErrOtherDatabase = errors.New("litequeue: the transaction is on another database than the queue's")

// checkTx returns ErrOtherDatabase (wrapped, naming both databases) unless
// the application's transaction tx is on the queue's database: an insert
// there would land in another database's tables of the queue's schema, or
// fail obscurely. It asks the server once per transaction: the last
// transaction found right is kept, with its id (a reference, so that no
// later transaction can have its address), and not asked again. (EnqueueTx asks in
// the statement that notifies, CompleteTx in its own statement: see
// insertAppTx and CompleteTx.)
func (s *pgStore) checkTx(ctx context.Context, tx *sql.Tx) error {
	if c := s.lastTx.Load(); c != nil && c.tx == tx {
		return nil
	}
	var db string
	var xid int64
	if err := tx.QueryRowContext(ctx, checkTxSQL).Scan(&db, &xid); err != nil {
		return err
	}
	if err := s.sameDatabase(db); err != nil {
		return err
	}
	s.lastTx.Store(&checkedTx{tx: tx, xid: xid})
	return nil
}

// missingTables returns ErrOtherDatabase, wrapping err, when err says the
// queue's schema or tables do not exist where a statement on an
// application's transaction ran (SQLSTATE 3F000 invalid_schema_name, 42P01
// undefined_table): they exist on the queue's database, so the transaction
// is on another one. Any other err is returned as it is.
func missingTables(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "3F000" || pe.Code == "42P01") {
		return fmt.Errorf("%w: the queue's tables are not on the transaction's database (%w); begin it on the *sql.DB the queue was made with (postgres.New)", ErrOtherDatabase, err)
	}
	return err
}

// sameDatabase returns ErrOtherDatabase, wrapped, unless db is the queue's
// database.
func (s *pgStore) sameDatabase(db string) error {
	if db == s.database {
		return nil
	}
	return fmt.Errorf("%w: it is on database %q, the queue on %q (schema %q); begin it on the *sql.DB the queue was made with (postgres.New)",
		ErrOtherDatabase, db, s.database, s.schema)
}
