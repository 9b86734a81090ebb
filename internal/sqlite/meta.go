package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/litequeue/litequeue/internal/store"
)

// A job's metadata (store.MetaDoc): the meta column of its row, and its
// tags once more in lq_job_tags (migration 0011), which listings by tag
// read.

// metaArg is nj's meta column: NULL for none.
func metaArg(nj *store.NewJob) any {
	if nj.Meta == "" {
		return nil
	}
	return nj.Meta
}

// writeTags stores nj's tags for the row id that insertRow just wrote, in
// the same transaction, and sweeps twice as many tag rows (sweepTagsSQL).
func writeTags(ctx context.Context, tx Execer, id int64, nj *store.NewJob) error {
	for _, tag := range nj.Tags {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO lq_job_tags (tag, job_id) VALUES (?, ?)`, tag, id); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, sweepTagsSQL, 2*len(nj.Tags))
	return err
}

// sweepTagsSQL deletes the tag rows of deleted jobs among ?1 consecutive
// rows of lq_job_tags_job from a random job id: lq_job_tags has no foreign
// key (migration 0011), and each tagged enqueue sweeps this way, twice as
// many rows as it adds: of the rows it samples, the share left by deleted
// jobs is then at most a half in the long run, so they stay no more than
// the live ones.
const sweepTagsSQL = `DELETE FROM lq_job_tags WHERE job_id IN (
    SELECT t.job_id FROM (SELECT job_id FROM lq_job_tags INDEXED BY lq_job_tags_job
        WHERE job_id >= (SELECT abs(random() % (max(job_id) + 1)) FROM lq_job_tags) ORDER BY job_id LIMIT ?1) t
    WHERE NOT EXISTS (SELECT 1 FROM lq_jobs j WHERE j.id = t.job_id))`

// metaWhere adds to a listing's conditions those of q's tags (one seek of
// lq_job_tags per row examined) and metadata (read from the meta column of
// the rows examined). With tags, tagFrom makes the first tag's range of
// lq_job_tags the rows examined.
func metaWhere(q store.JobQuery, where []string, args []any) ([]string, []any) {
	for i, tag := range q.Tags {
		name := "tag" + strconv.Itoa(i)
		where = append(where, fmt.Sprintf("EXISTS (SELECT 1 FROM lq_job_tags g WHERE g.tag = :%s AND g.job_id = lq_jobs.id)", name))
		args = append(args, sql.Named(name, tag))
	}
	keys := make([]string, 0, len(q.Metadata))
	for k := range q.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		kn, vn := "mdk"+strconv.Itoa(i), "mdv"+strconv.Itoa(i)
		where = append(where, fmt.Sprintf("meta IS NOT NULL AND json_extract(meta, '$.metadata.' || json_quote(:%s)) = :%s", kn, vn))
		args = append(args, sql.Named(kn, k), sql.Named(vn, q.Metadata[k]))
	}
	return where, args
}

// tagFrom is the FROM clause of a listing: with tags, the jobs are reached
// from the first tag's range of lq_job_tags, walked in id order (CROSS
// JOIN keeps that order of the loops), so that a page reads only the jobs
// of that tag, however few or many of the file's jobs have it; idCol is
// then the tag row's job id, which the window and the order use.
func tagFrom(q store.JobQuery) (from, idCol string) {
	if len(q.Tags) == 0 {
		return "lq_jobs", "id"
	}
	return "lq_job_tags tg CROSS JOIN lq_jobs ON lq_jobs.id = tg.job_id AND tg.tag = :tag0", "tg.job_id"
}

// metaVersion is the schema version that added the meta column and
// lq_job_tags (migration 0011).
const metaVersion = 11

// jobColumns is JobColumns, with NULL for meta on a file opened read-only
// at a schema older than metaVersion.
func (s *Store) jobColumns() string { return s.noMetaColumns(JobColumns) }

// noMetaColumns rewrites a query that selects JobColumns for a file
// without the meta column (Store.noMeta); other stores get it unchanged.
func (s *Store) noMetaColumns(query string) string {
	if !s.noMeta {
		return query
	}
	return strings.Replace(query, "dead_reason, meta", "dead_reason, NULL", 1)
}

// hasMetaFilter reports whether q filters by tag or metadata: on a file
// without them (Store.noMeta) it selects nothing.
func hasMetaFilter(q store.JobQuery) bool { return len(q.Tags) > 0 || len(q.Metadata) > 0 }
