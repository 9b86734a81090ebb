package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// samplePolicy is a RetryPolicy in its JSON form.
const samplePolicy = `{"max_attempts":5,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}`

// needPolicyJSON skips t until RetryPolicy decodes its JSON form: its
// UnmarshalJSON is added on another branch.
func needPolicyJSON(t *testing.T) {
	t.Helper()
	var p litequeue.RetryPolicy
	if err := json.Unmarshal([]byte(samplePolicy), &p); err != nil || p != litequeue.ExponentialRetry(5) {
		t.Skipf("needs RetryPolicy.UnmarshalJSON (snake_case keys, duration strings): decoding %s gave %+v, %v", samplePolicy, p, err)
	}
}

func TestPlanSchedule(t *testing.T) {
	p := litequeue.NewRetryPolicy(4, litequeue.Backoff{Kind: litequeue.BackoffExponential, Base: time.Second, Factor: 3, Max: 5 * time.Second, Jitter: true})
	require.Equal(t, retryPlan{MaxAttempts: 4, Jitter: true, Steps: []planStep{
		{Attempt: 1, Retry: true, Ceiling: time.Second, MinDelay: 0, MaxDelay: time.Second, Cumulative: time.Second},
		{Attempt: 2, Retry: true, Ceiling: 3 * time.Second, MinDelay: 0, MaxDelay: 3 * time.Second, Cumulative: 4 * time.Second},
		{Attempt: 3, Retry: true, Ceiling: 5 * time.Second, MinDelay: 0, MaxDelay: 5 * time.Second, Cumulative: 9 * time.Second},
		{Attempt: 4, Retry: false, Cumulative: 9 * time.Second},
	}}, planFor(p))

	fixed := planFor(litequeue.FixedRetry(3, time.Minute))
	require.False(t, fixed.Jitter)
	require.Equal(t, planStep{Attempt: 2, Retry: true, Ceiling: time.Minute, MinDelay: time.Minute, MaxDelay: time.Minute, Cumulative: 2 * time.Minute}, fixed.Steps[1])

	require.Equal(t, []planStep{{Attempt: 1}}, planFor(litequeue.RetryPolicy{}).Steps, "the zero policy runs once")

	huge := planFor(litequeue.FixedRetry(4, time.Duration(1<<62)))
	require.Equal(t, time.Duration(1<<63-1), huge.Steps[2].Cumulative, "the sum saturates instead of overflowing")
}

func TestPlanTablesMatchGoldenFiles(t *testing.T) {
	for name, p := range map[string]litequeue.RetryPolicy{
		"plan_exponential": litequeue.ExponentialRetry(5),
		"plan_fixed":       litequeue.FixedRetry(3, 30*time.Second),
		"plan_none":        litequeue.NoRetry(),
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, planTable(&b, p, planFor(p)))
			golden(t, name, b.String())
		})
	}
}

func TestPlanCommand(t *testing.T) {
	needPolicyJSON(t)
	r := lq(t, "", "plan", "--policy", samplePolicy)
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "plan_exponential", r.stdout)

	file := filepath.Join(t.TempDir(), "policy.json")
	require.NoError(t, os.WriteFile(file, []byte(samplePolicy), 0o644))
	r = lq(t, "", "plan", "--policy-file", file, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, 5.0, got["max_attempts"])
	require.Equal(t, true, got["jitter"])
	steps := got["steps"].([]any)
	require.Len(t, steps, 5)
	require.Equal(t, map[string]any{
		"attempt": 2.0, "retry": true, "ceiling": "2s", "min_delay": "0s",
		"max_delay": "2s", "cumulative_max": "3s",
	}, steps[1])
	require.Equal(t, false, steps[4].(map[string]any)["retry"])

	r = lq(t, samplePolicy, "plan", "--policy-file", "-")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "plan_exponential", r.stdout)
}

func TestPlanBadPolicy(t *testing.T) {
	r := lq(t, "", "plan", "--policy", `{"max_attempts":`)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "--policy: not a RetryPolicy")

	r = lq(t, "", "plan", "--policy-file", filepath.Join(t.TempDir(), "missing.json"))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "missing.json: no such file")
}
