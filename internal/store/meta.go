package store

// A job's metadata: what the application attached to it at enqueue, kept
// with the row as one JSON object (NewJob.Meta, Job.Meta, Claimed.Meta) of
// this shape. Its tags are indexed for listings (JobQuery.Tags).

// MetaDoc is the JSON object a job's meta column holds. Empty fields are
// left out; a job with none of them stores no meta at all.
type MetaDoc struct {
	Tags        []string          `json:"tags,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	TraceParent string            `json:"traceparent,omitempty"`
	TraceState  string            `json:"tracestate,omitempty"`
	// Occurrence is the scheduled time, in Unix nanoseconds, of the
	// schedule occurrence the job runs for; 0 for a job not from a
	// schedule.
	Occurrence int64 `json:"occurrence,omitempty"`
	// Flow marks a workflow's job: FlowParent, FlowChild (workflow.go).
	Flow int `json:"flow,omitempty"`
}

// IsZero reports whether d holds nothing to store.
func (d *MetaDoc) IsZero() bool {
	return len(d.Tags) == 0 && len(d.Metadata) == 0 && d.TraceParent == "" && d.TraceState == "" && d.Occurrence == 0 && d.Flow == 0
}
