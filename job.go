package litequeue

import "time"

// What a job is (Job) and how it is enqueued (EnqueueOptions, BatchItem).

// Job is a unit of work: any JSON-encodable type with a Kind. The kind names
// the handler that runs it and is stored with the job, so it must stay stable
// across releases.
//
// A job type may also implement
//
//	QueueName() string          // the queue it goes to; default "default"
//	RetryPolicy() *RetryPolicy  // its own policy; nil means "use the queue's"
//	Timeout() time.Duration     // its attempts' timeout: > 0 replaces QueueConfig.Timeout, < 0 means none, 0 the queue's
//	UniqueOptions() *UniqueOptions // uniqueness of its jobs (see UniqueOptions); nil for none
//
// Kind and QueueName are called on the zero value by Register, so implement
// them on a value receiver and return constants.
type Job interface {
	Kind() string
}

type queueNamer interface{ QueueName() string }

type retryPolicer interface{ RetryPolicy() *RetryPolicy }

// jobQueue returns the queue a job of this type goes to by default.
func jobQueue(j Job) string {
	if qn, ok := j.(queueNamer); ok {
		return qn.QueueName()
	}
	return DefaultQueue
}

// EnqueueOptions adjusts one enqueue. A nil *EnqueueOptions means none.
type EnqueueOptions struct {
	// Delay makes the job due Delay after now. Negative is an error
	// (ErrInvalidJob). Zero means now. Not together with RunAt.
	Delay time.Duration
	// RunAt makes the job due at RunAt. Zero means now. A time in the past
	// makes the job due at once, ordered by that time among jobs of its
	// priority; a time before 1970 counts as 1970-01-01 UTC, the earliest
	// due time the queue stores (such jobs run first, in id order, and show
	// that time). Times before 1678 or after 2262-04-11 (outside an int64 of
	// Unix nanoseconds) are refused with ErrInvalidJob.
	RunAt time.Time
	// Priority orders due jobs of a queue: lower runs first. Default 0;
	// negative values run before the default.
	Priority int
	// Key is an idempotency key, at most MaxKeyLen bytes of valid UTF-8
	// without NUL (ErrInvalidJob otherwise). Enqueuing with the
	// key of a job that is still pending, scheduled or running enqueues
	// nothing and returns that job's id with a *DuplicateError
	// (errors.Is(err, ErrDuplicate)). Once that job succeeded or died the
	// key is free again. Empty means no key.
	Key string
	// Queue overrides the job type's QueueName. Empty means the job's own.
	Queue string
	// Unique makes the job unique by kind and payload (see UniqueOptions),
	// overriding the job type's UniqueOptions method. Nil means the job
	// type's, if any. It works together with Key: the key is checked first.
	Unique *UniqueOptions
	// Tags label the job for listings (JobQuery.Tags, `lqinspect jobs
	// --tag`, the dashboard): at most MaxTags, each 1 to MaxTagLen of
	// a-z A-Z 0-9 . _ : / - (ErrInvalidMetadata otherwise). A repeated tag
	// is stored once. Nil means none.
	Tags []string
	// Metadata is key-value data stored with the job and shown with it
	// (JobInfo.Metadata, Delivery.Metadata); JobQuery.Metadata filters by
	// it. At most MaxMetadataKeys keys of at most MaxMetadataKeyLen bytes,
	// values of at most MaxMetadataValueLen bytes, all valid UTF-8 without
	// NUL (ErrInvalidMetadata otherwise). Nil means none.
	Metadata map[string]string
	// Trace is the W3C trace context to carry to the handler
	// (Delivery.Trace); the OpenTelemetry adapter sets it from the
	// context's span. Each field at most MaxTraceLen bytes. Zero means none.
	Trace TraceContext
	// Group is the job's group for the per-group limits of its queue
	// (QueueLimits.KeyConcurrency): a customer, a tenant, an account. It
	// overrides the job type's Group() string method. A name like a queue's
	// (1 to MaxNameLen bytes; ErrInvalidJob otherwise). Empty means the job
	// type's, if any, else none.
	Group string
}

// BatchItem is one job of EnqueueBatch with its options (nil for none).
type BatchItem struct {
	Job     Job
	Options *EnqueueOptions
}

// DefaultQueue is the queue of a job type without a QueueName method.
const DefaultQueue = "default"
