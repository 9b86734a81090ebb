package litequeue

import (
	"context"
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
