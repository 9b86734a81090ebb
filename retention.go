package litequeue

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Retention of finished jobs: how long completed, dead and cancelled jobs
// are kept, globally (Options) and per queue (QueueConfig).

// KeepForever, as a retention (Options.CompletedRetention, a QueueConfig's
// CompletedRetention, DeadRetention or CancelledRetention), keeps the jobs
// until they are deleted by hand.
const KeepForever time.Duration = math.MaxInt64

// KeepNone, as QueueConfig.CompletedRetention, deletes the queue's jobs
// when they succeed, whatever Options.CompletedRetention says.
const KeepNone time.Duration = -1

// retention returns how long jobs of cfg's queue in state st (completed,
// dead or cancelled) are kept: 0 for none (completed only) or for ever
// (dead and cancelled, as KeepForever).
func (o *Options) retention(cfg QueueConfig, st store.State) time.Duration {
	own, global := cfg.CompletedRetention, o.CompletedRetention
	switch st {
	case store.Dead:
		own, global = cfg.DeadRetention, o.DeadRetention
	case store.Cancelled:
		own, global = cfg.CancelledRetention, o.CancelledRetention
	}
	if own == KeepNone {
		return 0
	}
	if own != 0 {
		return own
	}
	return global
}

// completedRetention is how long p's queue keeps its succeeded jobs (0:
// deleted at success).
func (p *pool) completedRetention() time.Duration {
	return p.q.opts.retention(p.cfg, store.Completed)
}

// expiryRule is one deletion the maintenance makes: rows selected by
// Expiry once older than Retention.
type expiryRule struct {
	store.Expiry
	Retention time.Duration
}

// expiryRules returns the deletions q's retention asks for: per state, one
// rule for the queues configured with a retention of their own (one per
// distinct value) and one for every other queue; none for a retention that
// keeps for ever (or, for completed jobs, deletes at success).
func (q *core) expiryRules() []expiryRule {
	q.mu.Lock()
	cfgs := make([]QueueConfig, 0, len(q.configs))
	for _, c := range q.configs {
		cfgs = append(cfgs, c)
	}
	q.mu.Unlock()
	slices.SortFunc(cfgs, func(a, b QueueConfig) int { return strings.Compare(a.Name, b.Name) })
	var rules []expiryRule
	for _, st := range []store.State{store.Completed, store.Dead, store.Cancelled} {
		var own []string
		byValue := map[time.Duration][]string{}
		var order []time.Duration
		for _, c := range cfgs {
			if ownRetention(c, st) == 0 {
				continue
			}
			own = append(own, c.Name)
			r := q.opts.retention(c, st)
			if _, ok := byValue[r]; !ok {
				order = append(order, r)
			}
			byValue[r] = append(byValue[r], c.Name)
		}
		for _, r := range order {
			if expires(r) {
				rules = append(rules, expiryRule{Expiry: store.Expiry{State: st, Queues: byValue[r]}, Retention: r})
			}
		}
		if r := q.opts.retention(QueueConfig{}, st); expires(r) {
			rules = append(rules, expiryRule{Expiry: store.Expiry{State: st, Except: own}, Retention: r})
		}
	}
	return rules
}

// ownRetention is cfg's own retention field for state st.
func ownRetention(cfg QueueConfig, st store.State) time.Duration {
	switch st {
	case store.Dead:
		return cfg.DeadRetention
	case store.Cancelled:
		return cfg.CancelledRetention
	}
	return cfg.CompletedRetention
}

// expires reports whether a retention r deletes jobs after a while.
func expires(r time.Duration) bool { return r > 0 && r != KeepForever }
