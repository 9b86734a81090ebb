package litequeue

import (
	"encoding/json"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// A schedule's bounds (Schedule.RunImmediately, EndAt, MaxRuns) and the
// occurrence each of its jobs runs for (Delivery.Occurrence).

// ended reports whether s has no occurrence left when its next one would
// be next: past its EndAt, or its run limit reached.
func ended(s *store.Schedule, next int64) bool {
	return (s.EndAt != 0 && next > s.EndAt) || (s.MaxRuns > 0 && s.RunCount >= s.MaxRuns)
}

// bound applies s's EndAt and MaxRuns to a plan: it drops the occurrences
// after EndAt from on-time and missed ones (they are not missed: they do
// not exist), and returns how many jobs the run limit leaves room for (-1:
// no limit).
func bound(s *store.Schedule, latest []time.Time) ([]time.Time, int) {
	if s.EndAt != 0 {
		n := 0
		for _, at := range latest {
			if at.UnixNano() <= s.EndAt {
				latest[n] = at
				n++
			}
		}
		latest = latest[:n]
	}
	if s.MaxRuns <= 0 {
		return latest, -1
	}
	return latest, int(max(s.MaxRuns-s.RunCount, 0))
}

// occurrenceMeta records on nj the occurrence (Unix nanoseconds) it runs
// for.
func occurrenceMeta(nj *store.NewJob, at int64) error {
	doc := store.MetaDoc{Occurrence: at}
	if nj.Meta != "" {
		if err := json.Unmarshal([]byte(nj.Meta), &doc); err != nil {
			return err
		}
		doc.Occurrence = at
	}
	b, err := json.Marshal(&doc)
	if err != nil {
		return err
	}
	nj.Meta = string(b)
	return nil
}
