package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// A job's tags, metadata and trace context: `jobs --tag` lists by tag and
// `show` prints them.

// taggedJobs lists the jobs filter selects that carry every tag of the
// comma-separated tags, newest first, honouring filter's offset and limit:
// it pages through Queue.ListJobs, whose tag filter reads the tag index.
func taggedJobs(a *app, q *litequeue.Queue, filter litequeue.JobFilter, tags string) ([]litequeue.JobInfo, error) {
	if filter.Order != litequeue.OrderNewest {
		return nil, usagef("--tag lists newest first; leave out --order %s", filter.Order)
	}
	var list []string
	for _, t := range strings.Split(tags, ",") {
		list = append(list, strings.TrimSpace(t))
	}
	query := litequeue.JobQuery{Queue: filter.Queue, Kind: filter.Kind, States: filter.States, Tags: list}
	var out []litequeue.JobInfo
	want := filter.Offset + filter.Limit
	var before int64
	if filter.After != "" {
		id, err := strconv.ParseInt(filter.After, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--tag: %w", litequeue.ErrBadCursor)
		}
		before = id
	}
	for {
		page, err := q.ListJobs(a.ctx, query, litequeue.PageRequest{Before: before, Limit: 500})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Jobs...)
		if page.Next == 0 || (filter.Limit > 0 && len(out) >= want) {
			break
		}
		before = page.Next
	}
	if filter.Offset >= len(out) {
		return nil, nil
	}
	out = out[filter.Offset:]
	if filter.Limit > 0 && len(out) > filter.Limit {
		out = out[:filter.Limit]
	}
	return out, nil
}

// showMeta prints j's tags, metadata (a line per key, in key order), trace
// context and schedule occurrence, those it has.
func showMeta(field func(name, value string), j litequeue.JobInfo, now time.Time) {
	if len(j.Tags) > 0 {
		field("tags", strings.Join(j.Tags, ", "))
	}
	keys := make([]string, 0, len(j.Metadata))
	for k := range j.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field("metadata", fmt.Sprintf("%s=%s", k, j.Metadata[k]))
	}
	if j.Trace.TraceParent != "" {
		field("traceparent", j.Trace.TraceParent)
	}
	if j.Trace.TraceState != "" {
		field("tracestate", j.Trace.TraceState)
	}
	if !j.Occurrence.IsZero() {
		field("occurrence", whenTime(j.Occurrence, now))
	}
}
