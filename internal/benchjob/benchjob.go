// Package benchjob is the job of litequeue's benchmarks: the payload of the
// peer harness in ../shared/bench, 106 bytes of JSON for id 12345, so that
// lqbench and the micro-benchmarks measure the same work as the peers.
package benchjob

import "fmt"

// Job is {"id":i,"account":"acct_%08d","email":"user%08d@example.com","action":"welcome","amount":1000+i%1000}.
type Job struct {
	ID      int    `json:"id"`
	Account string `json:"account"`
	Email   string `json:"email"`
	Action  string `json:"action"`
	Amount  int    `json:"amount"`
	Pad     string `json:"pad,omitempty"` // lqbench -payload-bytes only
}

// Kind is the job's kind, "bench".
func (Job) Kind() string { return "bench" }

// New returns job i, padded with pad (empty for the harness's payload).
func New(i int, pad string) Job {
	return Job{
		ID:      i,
		Account: fmt.Sprintf("acct_%08d", i),
		Email:   fmt.Sprintf("user%08d@example.com", i),
		Action:  "welcome",
		Amount:  1000 + i%1000,
		Pad:     pad,
	}
}
