package litequeue

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// A schedule's jobs keep their type's uniqueness: RegisterSchedule reads
// the job's UniqueOptions and stores them with the schedule (as JSON in
// store.Schedule.Unique), and each firing computes every occurrence's
// uniqueness from them as an Enqueue of the job would.

// storedUnique is the stored form of a schedule's UniqueOptions.
type storedUnique struct {
	Fields     []string `json:"fields,omitempty"`
	Period     int64    `json:"period,omitempty"` // nanoseconds
	States     []State  `json:"states,omitempty"`
	OnConflict Conflict `json:"on_conflict,omitempty"`
}

// encodeUnique returns the stored form of u; "" for nil.
func encodeUnique(u *UniqueOptions) (string, error) {
	if u == nil {
		return "", nil
	}
	b, err := json.Marshal(storedUnique{Fields: u.Fields, Period: int64(u.Period), States: u.States, OnConflict: u.OnConflict})
	if err != nil {
		return "", fmt.Errorf("UniqueOptions: %v", err)
	}
	return string(b), nil
}

// decodeUnique reads a stored form; "" is nil.
func decodeUnique(s string) (*UniqueOptions, error) {
	if s == "" {
		return nil, nil
	}
	var su storedUnique
	if err := json.Unmarshal([]byte(s), &su); err != nil {
		return nil, fmt.Errorf("stored uniqueness %q: %v", s, err)
	}
	return &UniqueOptions{Fields: su.Fields, Period: time.Duration(su.Period), States: su.States, OnConflict: su.OnConflict}, nil
}

// scheduleUnique sets nj.Unique from schedule s's stored uniqueness and
// returns the options (nil for none).
func scheduleUnique(s *store.Schedule, nj *store.NewJob) (*UniqueOptions, error) {
	u, err := decodeUnique(s.Unique)
	if err != nil || u == nil {
		return nil, err
	}
	su, err := uniqueFor(u, nj)
	if err != nil {
		return nil, err
	}
	nj.Unique = su
	return u, nil
}
