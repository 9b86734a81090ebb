package litequeuetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
)

// NewDB runs the kit on the application's own database: an order and the
// job that charges it are written in one transaction, and the handler
// marks the order charged in the transaction that completes the job.
func ExampleNewDB() {
	t, done := exampleT() // in a test: the test's t
	defer done()

	db, _ := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL)`)

	k := litequeuetest.NewDB(t, db, &litequeue.Options{Queues: []litequeue.QueueConfig{{Name: "payments"}}})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'charged' WHERE id = ?`, d.Job.Order); err != nil {
			return err
		}
		if err := d.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	})
	ctx := context.Background()
	tx, _ := db.BeginTx(ctx, nil)
	tx.ExecContext(ctx, `INSERT INTO orders (id, status) VALUES (42, 'new')`)
	k.Queue.EnqueueTx(ctx, tx, ChargeCard{Order: 42}, nil)
	tx.Commit()

	res, err := k.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var status string
	db.QueryRow(`SELECT status FROM orders WHERE id = 42`).Scan(&status)
	fmt.Println(res.Succeeded, "succeeded; order 42 is", status)
	// Output: 1 succeeded; order 42 is charged
}
