package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// openSQLiteFloor opens D's commit floor on SQLite: an autocommit INSERT of
// the job's payload into a table of two columns, in a file of its own
// beside the queue's, on one connection in WAL mode with synchronous FULL
// (the queue's default durability; -pragmas apply to it as to the queue) —
// a statement prepared once. Nothing else runs on it: no queue, no index
// but the primary key. Its latency after an idle gap is the least that any
// queue which starts a job only after the job's enqueue committed can show
// in D on this disk.
func (b *bench) openSQLiteFloor(ctx context.Context) (insert func(payload []byte) error, closeFloor func(), err error) {
	dsn := "file:" + filepath.Join(filepath.Dir(b.path), "floor.sqlite3") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)"
	for _, p := range b.c.pragmas {
		dsn += "&_pragma=" + p
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("commit floor: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE lqbench_floor (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)"); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("commit floor: %w", err)
	}
	stmt, err := db.PrepareContext(ctx, "INSERT INTO lqbench_floor (payload) VALUES (?)")
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("commit floor: %w", err)
	}
	return func(payload []byte) error {
			_, err := stmt.ExecContext(ctx, payload)
			return err
		}, func() {
			stmt.Close()
			db.Close()
		}, nil
}

// openPGFloor opens D's commit floor on PostgreSQL: an autocommit INSERT of
// the job's payload into a table of two columns, on a pgx connection of its
// own to the run's database (a statement pgx prepares once). Nothing else
// runs on it: no queue, no index but the primary key, no notify. Its
// latency after an idle gap is the least that any queue which starts a job
// only after the job's enqueue committed can show in D on this server.
func (b *bench) openPGFloor(ctx context.Context) (insert func(payload []byte) error, closeFloor func(), err error) {
	conn, err := pgx.Connect(ctx, b.pg.url)
	if err != nil {
		return nil, nil, fmt.Errorf("commit floor: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE lqbench_floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload bytea NOT NULL)"); err != nil {
		conn.Close(context.Background())
		return nil, nil, fmt.Errorf("commit floor: %w", err)
	}
	const insertSQL = "INSERT INTO lqbench_floor (payload) VALUES ($1)"
	return func(payload []byte) error {
			_, err := conn.Exec(ctx, insertSQL, payload)
			return err
		}, func() {
			conn.Close(context.Background())
		}, nil
}

// openFloor opens the store's commit floor (openPGFloor, openSQLiteFloor).
func (b *bench) openFloor(ctx context.Context) (insert func(payload []byte) error, closeFloor func(), err error) {
	if b.pg != nil {
		return b.openPGFloor(ctx)
	}
	return b.openSQLiteFloor(ctx)
}

// commitFloor is D's -commit-floor: the floor's insert (openFloor) timed
// alone, after the same idle gaps as D, in place of the queue.
func (b *bench) commitFloor(ctx context.Context, res *Result) error {
	insert, closeFloor, err := b.openFloor(ctx)
	if err != nil {
		return err
	}
	defer closeFloor()
	return b.timeFloor(res, insert)
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
		ms, err := floorSample(insert, i)
		if err != nil {
			return err
		}
		lat = append(lat, ms)
	}
	res.ElapsedS = time.Since(t00).Seconds()
	latencies(res, lat)
	return nil
}

// floorSample times one insert of the floor with job i's payload, in ms.
func floorSample(insert func(payload []byte) error, i int) (float64, error) {
	payload, err := json.Marshal(newJob(i))
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := insert(payload); err != nil {
		return 0, fmt.Errorf("commit floor: insert %d: %w", i, err)
	}
	return ms(time.Since(t0)), nil
}

// vsFloor sets D's comparison with the commit floor (-vs-floor) on res from
// the queue's and the floor's samples, taken in turns in one run: the
// floor's p50 and p99 and the queue's excess over them.
func vsFloor(res *Result, floor []float64) {
	sort.Float64s(floor)
	p50, p99 := round3(pct(floor, 50)), round3(pct(floor, 99))
	res.FloorP50Ms, res.FloorP99Ms = &p50, &p99
	d50, d99 := round3(*res.P50Ms-p50), round3(*res.P99Ms-p99)
	res.OverFloorP50Ms, res.OverFloorP99Ms = &d50, &d99
	if p99 > 0 {
		r := round3(*res.P99Ms / p99)
		res.P99OverFloor = &r
	}
}
