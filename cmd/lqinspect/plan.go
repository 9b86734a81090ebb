package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// planStep is one failed attempt of a retry schedule.
type planStep struct {
	// Attempt is the failed attempt, 1 for the first try.
	Attempt int `json:"attempt"`
	// Retry is false for the last attempt: the job becomes a dead letter.
	Retry bool `json:"retry"`
	// Ceiling is the backoff's wait before any jitter; MinDelay and MaxDelay
	// bound the wait actually drawn (equal to Ceiling without jitter).
	Ceiling  time.Duration `json:"ceiling"`
	MinDelay time.Duration `json:"min_delay"`
	MaxDelay time.Duration `json:"max_delay"`
	// Cumulative is the sum of the ceilings so far: the longest time since
	// the first failure until the next attempt is due (with jitter it may
	// be as little as 0).
	Cumulative time.Duration `json:"cumulative_max"`
}

// MarshalJSON writes the durations as Go duration strings ("1m30s"), the
// convention of all of litequeue's JSON.
func (s planStep) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Attempt    int    `json:"attempt"`
		Retry      bool   `json:"retry"`
		Ceiling    string `json:"ceiling"`
		MinDelay   string `json:"min_delay"`
		MaxDelay   string `json:"max_delay"`
		Cumulative string `json:"cumulative_max"`
	}{s.Attempt, s.Retry, s.Ceiling.String(), s.MinDelay.String(), s.MaxDelay.String(), s.Cumulative.String()})
}

// planStepLimit is how many attempts plan lists at most: a policy may allow
// billions (retry for ever), which no table can show.
const planStepLimit = 1000

// retryPlan is the document plan --json prints.
type retryPlan struct {
	MaxAttempts int        `json:"max_attempts"`
	Jitter      bool       `json:"jitter"`
	Steps       []planStep `json:"steps"`
	// NotListed is how many attempts after the listed ones the policy
	// allows (more than planStepLimit in all).
	NotListed int `json:"steps_not_listed,omitempty"`
}

func (a *app) plan(args []string) error {
	fs := a.newFlags("plan", "(--policy JSON | --policy-file PATH)", `
Print the retry schedule a RetryPolicy gives, to check a configuration
before deploying it: for each failed attempt, the backoff ceiling, the range
the wait is drawn from (with jitter: 0 to the ceiling), and the longest
cumulative time since the first failure. The policy is JSON, for example

  {"max_attempts":5,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}`)
	policyJSON := fs.String("policy", "", "the RetryPolicy as JSON")
	policyFile := fs.String("policy-file", "", `read the RetryPolicy JSON from this file ("-": stdin)`)
	fs.jsonFlag()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("plan takes no arguments, got %q", pos)
	case (*policyJSON == "") == (*policyFile == ""):
		return usagef("give exactly one of --policy and --policy-file")
	}
	data := []byte(*policyJSON)
	source := "--policy"
	if *policyFile != "" {
		source = *policyFile
		if *policyFile == "-" {
			data, err = io.ReadAll(a.stdin)
		} else {
			data, err = os.ReadFile(*policyFile)
		}
		if err != nil {
			return err
		}
	}
	var p litequeue.RetryPolicy
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("%s: not a RetryPolicy: %w", source, err)
	}
	plan := planFor(p)
	if fs.json {
		return writeJSON(a.stdout, plan)
	}
	return planTable(a.stdout, p, plan)
}

// planFor computes the schedule of p: its first planStepLimit attempts.
func planFor(p litequeue.RetryPolicy) retryPlan {
	jitter := p.Backoff.Kind == litequeue.BackoffExponential && p.Backoff.Jitter
	listed := min(p.Attempts(), planStepLimit)
	plan := retryPlan{MaxAttempts: p.Attempts(), Jitter: jitter, Steps: make([]planStep, 0, listed), NotListed: p.Attempts() - listed}
	var total time.Duration
	for n := 1; n <= listed; n++ {
		step := planStep{Attempt: n, Retry: n < p.Attempts(), Cumulative: total}
		if step.Retry {
			step.Ceiling = p.Backoff.Ceiling(n)
			step.MaxDelay = step.Ceiling
			if !jitter {
				step.MinDelay = step.Ceiling
			}
			total = addCapped(total, step.Ceiling)
			step.Cumulative = total
		}
		plan.Steps = append(plan.Steps, step)
	}
	return plan
}

// addCapped adds without overflowing.
func addCapped(a, b time.Duration) time.Duration {
	if a > time.Duration(1<<63-1)-b {
		return time.Duration(1<<63 - 1)
	}
	return a + b
}

func planTable(w io.Writer, p litequeue.RetryPolicy, plan retryPlan) error {
	if plan.MaxAttempts == 1 {
		fmt.Fprint(w, "1 attempt: the job never retries; its first failure makes it a dead letter\n\n")
	} else {
		fmt.Fprintf(w, "%d attempts; %s\n\n", plan.MaxAttempts, describeBackoff(p.Backoff))
	}
	rows := make([][]string, len(plan.Steps))
	for i, s := range plan.Steps {
		if !s.Retry {
			rows[i] = []string{strconv.Itoa(s.Attempt), "gives up: dead letter", none, none, roundDuration(s.Cumulative)}
			continue
		}
		rows[i] = []string{strconv.Itoa(s.Attempt), "retry #" + strconv.Itoa(s.Attempt+1), roundDuration(s.Ceiling),
			fmt.Sprintf("[%s, %s]", roundDuration(s.MinDelay), roundDuration(s.MaxDelay)), roundDuration(s.Cumulative)}
	}
	if err := table(w, "", []string{"FAILED ATTEMPT", "THEN", "CEILING", "WAIT RANGE", "CUMULATIVE (MAX)"}, rows); err != nil {
		return err
	}
	if plan.NotListed > 0 {
		fmt.Fprintf(w, "… attempts %d to %d (%d more) not listed: plan lists the first %d attempts\n",
			planStepLimit+1, plan.MaxAttempts, plan.NotListed, planStepLimit)
	}
	switch {
	case plan.MaxAttempts == 1:
		return nil
	case plan.Jitter:
		_, err := fmt.Fprintln(w, "\nWith jitter each wait is drawn from its range: the cumulative time is at most the sum of the ceilings and may be as little as 0.")
		return err
	}
	_, err := fmt.Fprintln(w, "\nWithout jitter each wait is its ceiling: the cumulative time is exact.")
	return err
}

// describeBackoff says in words what a Backoff does.
func describeBackoff(b litequeue.Backoff) string {
	switch b.Kind {
	case litequeue.BackoffFixed:
		return "fixed backoff of " + roundDuration(max(b.Delay, 0))
	case litequeue.BackoffExponential:
		var parts []string
		parts = append(parts, "exponential backoff from "+roundDuration(b.Base), "factor "+strconv.FormatFloat(b.Factor, 'g', 4, 64), "max "+roundDuration(b.Max))
		if b.Jitter {
			parts = append(parts, "full jitter")
		}
		return strings.Join(parts, ", ")
	}
	return "no backoff (retries at once)"
}
