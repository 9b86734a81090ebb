package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqliteCommitFloor is D's -commit-floor on SQLite: after the same idle
// gaps as D, one autocommit INSERT of the job's payload into a table of two
// columns, in a file of its own beside the queue's, on one connection in
// WAL mode with synchronous FULL (the queue's default durability; -pragmas
// apply to it as to the queue) — a statement prepared once. Nothing else
// runs: no queue, no index but the primary key. Its latency is the least
// that any queue which starts a job only after the job's enqueue committed
// can show in D on this disk.
func (b *bench) sqliteCommitFloor(ctx context.Context, res *Result) error {
	dsn := "file:" + filepath.Join(filepath.Dir(b.path), "floor.sqlite3") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)"
	for _, p := range b.c.pragmas {
		dsn += "&_pragma=" + p
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("commit floor: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE lqbench_floor (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)"); err != nil {
		return fmt.Errorf("commit floor: %w", err)
	}
	insert, err := db.PrepareContext(ctx, "INSERT INTO lqbench_floor (payload) VALUES (?)")
	if err != nil {
		return fmt.Errorf("commit floor: %w", err)
	}
	defer insert.Close()
	return b.timeFloor(res, func(payload []byte) error {
		_, err := insert.ExecContext(ctx, payload)
		return err
	})
}

// timeFloor times the commit floor of D (-commit-floor): one warm-up
// insert, 500 ms idle, then n times D's idle gap and one insert of job i's
// payload; the latency is insert's.
func (b *bench) timeFloor(res *Result, insert func(payload []byte) error) error {
	payload, err := json.Marshal(newJob(-1))
	if err != nil {
		return err
	}
	if err := insert(payload); err != nil { // warm-up, as D's
		return fmt.Errorf("commit floor: %w", err)
	}
	time.Sleep(500 * time.Millisecond)
	gap := b.c.gaps()
	lat := make([]float64, 0, b.c.n)
	t00 := time.Now()
	for i := 0; i < b.c.n; i++ {
		time.Sleep(gap())
		payload, err := json.Marshal(newJob(i))
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := insert(payload); err != nil {
			return fmt.Errorf("commit floor: insert %d: %w", i, err)
		}
		lat = append(lat, ms(time.Since(t0)))
	}
	res.ElapsedS = time.Since(t00).Seconds()
	latencies(res, lat)
	return nil
}

// commitFloor is D's -commit-floor: after the same idle gaps as D, one
// autocommit INSERT of the job's payload into a table of two columns, on a
// pgx connection of its own to the run's database (a statement pgx prepares
// once). Nothing else runs: no queue, no index but the primary key, no
// notify. Its latency is the least that any queue which starts a job only
// after the job's enqueue committed can show in D on this server.
func (b *bench) commitFloor(ctx context.Context, res *Result) error {
	conn, err := pgx.Connect(ctx, b.pg.url)
	if err != nil {
		return fmt.Errorf("commit floor: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE lqbench_floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload bytea NOT NULL)"); err != nil {
		return fmt.Errorf("commit floor: %w", err)
	}
	const insert = "INSERT INTO lqbench_floor (payload) VALUES ($1)"
	return b.timeFloor(res, func(payload []byte) error {
		_, err := conn.Exec(ctx, insert, payload)
		return err
	})
}
