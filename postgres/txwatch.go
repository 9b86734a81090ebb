package postgres

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/store"
)

var _ store.TxWatcher = (*pgStore)(nil)

// TxMark implements store.TxWatcher: the transaction's id, as the check of
// the transaction's database read it (see checkTx), or read on it now.
func (s *pgStore) TxMark(ctx context.Context, apptx store.Tx, id, createdAt int64) (store.TxMark, error) {
	tx := apptx.SQL()
	if c := s.lastTx.Load(); c != nil && c.tx == tx {
		return store.TxMark{ID: id, CreatedAt: createdAt, XID: c.xid}, nil
	}
	var xid int64
	if err := tx.QueryRowContext(ctx, `SELECT txid_current()`).Scan(&xid); err != nil {
		return store.TxMark{}, err
	}
	return store.TxMark{ID: id, CreatedAt: createdAt, XID: xid}, nil
}

// txStatusSQL reads the status of transactions by id, in the order given.
const txStatusSQL = `SELECT txid_status(x) FROM unnest($1::bigint[]) WITH ORDINALITY AS t(x, n) ORDER BY n`

// TxEnded implements store.TxWatcher with txid_status, which answers at
// once: a transaction still running is open. One too old for the server
// to know (NULL) ended long ago and is reported rolled back: its jobs, if
// any, are not reported again.
func (s *pgStore) TxEnded(ctx context.Context, marks []store.TxMark) ([]store.TxState, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	xids := make([]int64, len(marks))
	for i, m := range marks {
		xids[i] = m.XID
	}
	rows, err := s.db.QueryContext(ctx, txStatusSQL, xids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	states := make([]store.TxState, 0, len(marks))
	for rows.Next() {
		var st sql.NullString
		if err := rows.Scan(&st); err != nil {
			return nil, err
		}
		switch st.String {
		case "committed":
			states = append(states, store.TxCommitted)
		case "in progress":
			states = append(states, store.TxOpen)
		default:
			states = append(states, store.TxRolledBack)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return states, nil
}
