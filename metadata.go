package litequeue

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// A job's metadata: tags and key-value metadata the application attaches at
// enqueue (EnqueueOptions.Tags and Metadata), the W3C trace context of the
// enqueue (EnqueueOptions.Trace) and, for a schedule's job, the occurrence
// it runs for. They are stored with the job, shown on JobInfo and on the
// Delivery, and JobQuery filters by them.

// Limits of a job's metadata, checked at enqueue (ErrInvalidMetadata,
// nothing written).
const (
	// MaxTags is the most tags of one job.
	MaxTags = 16
	// MaxTagLen is the longest tag in bytes. A tag is 1 to MaxTagLen of the
	// characters a-z, A-Z, 0-9 and . _ : / - (no spaces, so that a tag
	// reads the same in a URL, a shell and a listing).
	MaxTagLen = 64
	// MaxMetadataKeys is the most metadata keys of one job.
	MaxMetadataKeys = 32
	// MaxMetadataKeyLen is the longest metadata key in bytes (1 at least;
	// valid UTF-8 without NUL or control characters).
	MaxMetadataKeyLen = 128
	// MaxMetadataValueLen is the longest metadata value in bytes (valid
	// UTF-8 without NUL).
	MaxMetadataValueLen = 1024
	// MaxTraceLen is the longest TraceContext field in bytes (the W3C
	// limit of tracestate is 512 characters).
	MaxTraceLen = 512
)

// ErrInvalidMetadata: an enqueue's Tags, Metadata or Trace broke a limit
// (see MaxTags and the limits beside it). Nothing was written. The error
// is also ErrInvalidJob.
var ErrInvalidMetadata = errors.New("litequeue: invalid job metadata")

// TraceContext is the W3C trace context (https://www.w3.org/TR/trace-context/)
// of the request that enqueued a job, carried to its handler: the values of
// the traceparent and tracestate headers. The queue stores it and hands it
// back (Delivery.Trace, AttemptInfo.Trace, JobInfo.Trace) without reading
// it; the OpenTelemetry adapter (metrics/otel) fills it at enqueue and
// continues the trace in the handler. The zero value is no trace.
type TraceContext struct {
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// IsZero reports whether t carries no trace.
func (t TraceContext) IsZero() bool { return t.TraceParent == "" && t.TraceState == "" }

// invalidMeta is an ErrInvalidMetadata (and ErrInvalidJob) error.
func invalidMeta(format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{ErrInvalidJob, ErrInvalidMetadata}, args...)...)
}

// validTag reports whether tag keeps to MaxTagLen and the tag characters.
func validTag(tag string) error {
	if tag == "" || len(tag) > MaxTagLen {
		return invalidMeta("tag %q is %d bytes; a tag is 1 to %d", tag, len(tag), MaxTagLen)
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '/' || c == '-') {
			return invalidMeta("tag %q holds %q at byte %d; a tag holds only a-z, A-Z, 0-9 and . _ : / -", tag, c, i)
		}
	}
	return nil
}

// prepareMeta checks o's tags, metadata and trace context against the
// limits and stores them on nj; occurrence, when not zero, is the schedule
// occurrence the job runs for.
func prepareMeta(o *EnqueueOptions, occurrence int64, nj *store.NewJob) error {
	doc := store.MetaDoc{Occurrence: occurrence}
	if o != nil {
		if len(o.Tags) > MaxTags {
			return invalidMeta("%d tags, more than %d", len(o.Tags), MaxTags)
		}
		for _, tag := range o.Tags {
			if err := validTag(tag); err != nil {
				return err
			}
			if !slices.Contains(doc.Tags, tag) {
				doc.Tags = append(doc.Tags, tag)
			}
		}
		if len(o.Metadata) > MaxMetadataKeys {
			return invalidMeta("%d metadata keys, more than %d", len(o.Metadata), MaxMetadataKeys)
		}
		for k, v := range o.Metadata {
			if k == "" {
				return invalidMeta("empty metadata key")
			}
			if err := checkText(ErrInvalidMetadata, "metadata key", k, MaxMetadataKeyLen); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidJob, err)
			}
			for _, r := range k {
				if r < 0x20 || r == 0x7f {
					return invalidMeta("metadata key %q holds the control character %U", k, r)
				}
			}
			if err := checkText(ErrInvalidMetadata, fmt.Sprintf("metadata value of %q", k), v, MaxMetadataValueLen); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidJob, err)
			}
		}
		if len(o.Metadata) > 0 {
			doc.Metadata = o.Metadata
		}
		for _, f := range []struct{ name, v string }{{"traceparent", o.Trace.TraceParent}, {"tracestate", o.Trace.TraceState}} {
			if err := checkText(ErrInvalidMetadata, "trace context "+f.name, f.v, MaxTraceLen); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidJob, err)
			}
		}
		doc.TraceParent, doc.TraceState = o.Trace.TraceParent, o.Trace.TraceState
	}
	if doc.IsZero() {
		return nil
	}
	b, err := json.Marshal(&doc)
	if err != nil {
		return invalidMeta("%v", err)
	}
	nj.Meta, nj.Tags = string(b), doc.Tags
	return nil
}

// jobMeta is a stored job's metadata, decoded.
type jobMeta struct {
	tags       []string
	metadata   map[string]string
	trace      TraceContext
	occurrence time.Time
}

// decodeMeta decodes a meta column; "" (and, defensively, text that is not
// the queue's JSON) is no metadata.
func decodeMeta(s string) jobMeta {
	if s == "" {
		return jobMeta{}
	}
	var doc store.MetaDoc
	if json.Unmarshal([]byte(s), &doc) != nil {
		return jobMeta{}
	}
	m := jobMeta{tags: doc.Tags, metadata: doc.Metadata,
		trace: TraceContext{TraceParent: doc.TraceParent, TraceState: doc.TraceState}}
	if doc.Occurrence != 0 {
		m.occurrence = time.Unix(0, doc.Occurrence)
	}
	return m
}

// checkMetaQuery reports whether f's tag and metadata filters can match
// anything: a tag or key no enqueue accepts selects nothing.
func checkMetaQuery(f JobQuery) bool {
	for _, tag := range f.Tags {
		if validTag(tag) != nil {
			return false
		}
	}
	for k, v := range f.Metadata {
		if !storableText(k) || !storableText(v) {
			return false
		}
	}
	return true
}
