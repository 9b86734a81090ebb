package litequeue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// How retry policies and backoffs read and write JSON: the error that names
// the field at fault, and the strict decoding both use.

// PolicyError reports a RetryPolicy or Backoff field that JSON cannot carry:
// one UnmarshalJSON rejects, or one MarshalJSON refuses to write. Use
// errors.As to get it.
type PolicyError struct {
	// Field is the JSON path of the offending field, such as "max_attempts"
	// or "backoff.delay"; empty when the whole document is at fault.
	Field string
	// Err says what is wrong with it.
	Err error
}

func (e *PolicyError) Error() string {
	if e.Field == "" {
		return "retry policy: " + e.Err.Error()
	}
	return "retry policy: " + e.Field + ": " + e.Err.Error()
}

func (e *PolicyError) Unwrap() error { return e.Err }

// decodeObject splits a JSON object into its values by key. It returns nil
// fields and no error for JSON null, and a *PolicyError for anything but an
// object or for a key outside known.
func decodeObject(data []byte, known ...string) (map[string]json.RawMessage, error) {
	if isNull(data) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, &PolicyError{Err: fmt.Errorf("a JSON object is expected: %w", err)}
	}
	for key := range fields {
		if !slices.Contains(known, key) {
			return nil, &PolicyError{Field: key, Err: errors.New("unknown field")}
		}
	}
	return fields, nil
}

// decodeField decodes the value under key into dst, if present and not null.
func decodeField(fields map[string]json.RawMessage, key string, dst any) error {
	raw, ok := fields[key]
	if !ok || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return &PolicyError{Field: key, Err: err}
	}
	return nil
}

func isNull(raw []byte) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// decodeDuration sets *dst from the Go duration string under key, if present.
func decodeDuration(fields map[string]json.RawMessage, key string, dst *time.Duration) error {
	raw, ok := fields[key]
	if !ok || isNull(raw) {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return &PolicyError{Field: key, Err: fmt.Errorf(
			`a Go duration string such as "500ms" is expected, not %s`, raw)}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return &PolicyError{Field: key, Err: err}
	}
	if d < 0 {
		return &PolicyError{Field: key, Err: fmt.Errorf("negative duration %q", s)}
	}
	*dst = d
	return nil
}
