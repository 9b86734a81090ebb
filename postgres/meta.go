package postgres

import (
	"slices"

	"github.com/litequeue/litequeue/internal/store"
)

// A job's metadata (store.MetaDoc) is the jsonb column meta of its row
// (migration 0004), written by insertOne (a job with metadata takes the
// slow path); its tags are indexed by lq_jobs_tags.

// metaWhere adds to a listing's conditions on table alias t those of q's
// tags (through the GIN index lq_jobs_tags) and metadata.
func metaWhere(q store.JobQuery, where []string, a *args, t string) []string {
	for _, tag := range q.Tags {
		where = append(where, "("+t+".meta IS NOT NULL AND "+t+".meta -> 'tags' @> jsonb_build_array("+a.add(tag)+"::text))")
	}
	keys := make([]string, 0, len(q.Metadata))
	for k := range q.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		where = append(where, "("+t+".meta IS NOT NULL AND "+t+".meta -> 'metadata' ->> "+a.add(k)+"::text = "+a.add(q.Metadata[k])+"::text)")
	}
	return where
}
