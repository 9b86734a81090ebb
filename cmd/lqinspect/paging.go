package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/litequeue/litequeue"
)

// Paging of jobs and dead: a page of --limit jobs (100 unless told),
// --after CURSOR for the next one, --limit 0 for every match, read and
// printed page by page by cursor so that a million jobs never sit in
// memory at once.

// defaultListLimit is the page jobs and dead print without --limit.
const defaultListLimit = 100

// maxOffset is the largest --offset: past it an offset walks too many rows
// to skip them, and a cursor (--after) is the way on.
const maxOffset = 10_000

// streamPage is the page size of a --limit 0 listing.
const streamPage = 1000

// liveStates are the states a next-due listing without --state shows: the
// jobs that have a due time ahead of them.
var liveStates = []litequeue.State{litequeue.StateReady, litequeue.StateScheduled, litequeue.StateRunning}

// pageWriter prints a listing one page at a time: a JSON array whose
// elements arrive page by page, or a table per page, its header on the
// first only.
type pageWriter struct {
	w     io.Writer
	json  bool
	table func(w io.Writer, jobs []litequeue.JobInfo, now time.Time) error
	now   time.Time
	n     int // jobs written so far
}

// page writes jobs, the next page.
func (p *pageWriter) page(jobs []litequeue.JobInfo) error {
	if p.json {
		for _, j := range jobs {
			b, err := json.MarshalIndent(j, "  ", "  ")
			if err != nil {
				return err
			}
			sep := ",\n  "
			if p.n == 0 {
				sep = "[\n  "
			}
			if _, err := io.WriteString(p.w, sep); err != nil {
				return err
			}
			if _, err := p.w.Write(safeJSON(b)); err != nil {
				return err
			}
			p.n++
		}
		return nil
	}
	if p.n > 0 && len(jobs) > 0 {
		// Later pages: the rows without the header line.
		hw := &skipLine{w: p.w}
		p.n += len(jobs)
		return p.table(hw, jobs, p.now)
	}
	if p.n == 0 && len(jobs) == 0 {
		return p.table(p.w, nil, p.now) // says there are none
	}
	p.n += len(jobs)
	return p.table(p.w, jobs, p.now)
}

// end closes the listing.
func (p *pageWriter) end() error {
	if !p.json {
		return nil
	}
	if p.n == 0 {
		_, err := io.WriteString(p.w, "[]\n")
		return err
	}
	_, err := io.WriteString(p.w, "\n]\n")
	return err
}

// skipLine drops the first line written through it.
type skipLine struct {
	w       io.Writer
	skipped bool
}

func (s *skipLine) Write(b []byte) (int, error) {
	n := len(b)
	if !s.skipped {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i == len(b) {
			return n, nil // still in the first line
		}
		s.skipped = true
		b = b[i+1:]
	}
	if _, err := s.w.Write(b); err != nil {
		return 0, err
	}
	return n, nil
}

// listPages lists what filter selects through fetch, page by page: one
// page of limit jobs (then a note on stderr if more match), or with limit
// 0 every match, a page of streamPage at a time, each after the last one's
// cursor.
func (a *app) listPages(pw *pageWriter, filter litequeue.JobFilter, limit int,
	fetch func(litequeue.JobFilter) ([]litequeue.JobInfo, error)) error {
	size := limit
	if limit == 0 {
		size = streamPage
	}
	filter.Limit = size + 1 // one more, to tell whether more match
	for {
		jobs, err := fetch(filter)
		if err != nil {
			return err
		}
		more := len(jobs) > size
		if more {
			jobs = jobs[:size]
		}
		if err := pw.page(jobs); err != nil {
			return err
		}
		if !more {
			return pw.end()
		}
		cursor := jobs[len(jobs)-1].Cursor(filter.Order)
		if limit > 0 {
			if err := pw.end(); err != nil {
				return err
			}
			// Never cut a listing silently, with --json neither: stdout
			// stays one JSON document, stderr says there is more.
			_, err := fmt.Fprintf(a.stderr, "showing %d; more match: --after %s for the next page, or --limit 0 for all\n", len(jobs), cursor)
			return err
		}
		filter.After, filter.Offset = cursor, 0
	}
}
