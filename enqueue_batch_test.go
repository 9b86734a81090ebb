package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// EnqueueBatch inserts runs of keyless jobs with multi-row INSERTs: every
// item must still get its own job's id, in order, around keyed items and
// duplicates.
func TestEnqueueBatchIDsMatchItems(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	var items []BatchItem
	for i := range 700 {
		var o *EnqueueOptions
		switch i {
		case 300, 301, 517:
			o = &EnqueueOptions{Key: fmt.Sprint("k", i)}
		case 302:
			o = &EnqueueOptions{Key: "k300"} // duplicate of item 300
		}
		items = append(items, BatchItem{Job: Resize{N: i}, Options: o})
	}
	ids, err := h.q.EnqueueBatch(ctx, items)
	var dup *DuplicateError
	require.True(t, errors.As(err, &dup), "%v", err)
	require.Len(t, ids, len(items))
	require.Equal(t, ids[300], ids[302])
	seen := map[int64]bool{}
	for i, id := range ids {
		if i == 302 {
			continue
		}
		require.False(t, seen[id], "id %d twice", id)
		seen[id] = true
		j, err := h.q.Job(ctx, id)
		require.NoError(t, err)
		var r Resize
		require.NoError(t, json.Unmarshal(j.Payload, &r))
		require.Equal(t, i, r.N, "item %d got the id of item %d", i, r.N)
	}
}

// A batch whose item fails to insert (here: a trigger that aborts the
// insert of a poisoned payload) commits nothing and names the item, whether
// the item goes through the multi-row insert of keyless jobs, the
// single-row insert, or the keyed insert with its duplicate check.
func TestEnqueueBatchWithAFailingInsertCommitsNothing(t *testing.T) {
	h := setup(t, nil)
	db, err := sql.Open("sqlite", "file:"+h.path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON lq_jobs
		WHEN instr(CAST(NEW.payload AS TEXT), 'poison') > 0
		BEGIN SELECT RAISE(ABORT, 'poisoned payload'); END`)
	require.NoError(t, err)
	defer db.Exec(`DROP TRIGGER poison`)

	item := func(to, key string) BatchItem {
		return BatchItem{Job: SendEmail{To: to}, Options: &EnqueueOptions{Key: key}}
	}
	cases := map[string]struct {
		items []BatchItem
		want  string
	}{
		"multi-row insert":  {[]BatchItem{item("a", ""), item("poison", ""), item("c", ""), item("d", "")}, "batch items 0-3"},
		"single-row insert": {[]BatchItem{item("a", ""), item("b", ""), item("poison", "")}, "batch item 2"},
		"keyed insert":      {[]BatchItem{item("a", "k1"), item("poison", "k2"), item("c", "k3")}, "batch item 1"},
	}
	ctx := context.Background()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ids, err := h.q.EnqueueBatch(ctx, c.items)
			require.ErrorContains(t, err, "poisoned payload")
			require.ErrorContains(t, err, c.want)
			require.Nil(t, ids)
			jobs, err := h.q.Jobs(ctx, JobFilter{})
			require.NoError(t, err)
			require.Empty(t, jobs, "a failed batch commits nothing")
		})
	}
	// The queue still works: the same batches without the poisoned item.
	ids, err := h.q.EnqueueBatch(ctx, []BatchItem{item("a", "k1"), item("b", "")})
	require.NoError(t, err)
	require.Len(t, ids, 2)
	jobs, err := h.q.Jobs(ctx, JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
}
