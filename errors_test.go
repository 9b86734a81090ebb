package litequeue

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RetryAfter's message is the handler's own: the delay is recorded apart
// (the attempt's Delay, EventRetrying's Delay), and a handler's message
// often says it already — it must not appear twice.
func TestRetryAfterMessageIsTheHandlersOwn(t *testing.T) {
	cause := errors.New("mailer: 429 too many requests, retry after 30s")
	err := RetryAfter(30*time.Second, cause)
	require.Equal(t, "mailer: 429 too many requests, retry after 30s", err.Error())
	require.ErrorIs(t, err, cause)
	var ra *RetryAfterError
	require.ErrorAs(t, fmt.Errorf("send: %w", err), &ra)
	require.Equal(t, 30*time.Second, ra.Delay)
	require.Equal(t, "retry after 1m0s", RetryAfter(time.Minute, nil).Error())
}
