package litequeue

import "container/heap"

// Giving claimed jobs back without using an attempt: the queued ones when a
// queue pauses or stops, the running ones when Stop must end their handlers.

// releaseQueued returns the claimed, unstarted jobs of p.
func (p *pool) releaseQueued() {
	var ds []*delivery
	for {
		select {
		case <-p.tokens:
			p.mu.Lock()
			d := heap.Pop(&p.ready).(*delivery)
			p.mu.Unlock()
			if d.releaseUnstarted() {
				ds = append(ds, d)
			} else {
				p.record(d, droppedOutcome(d.state(), false, nil, 0)) // lost or cancelled while it waited
			}
			continue
		default:
		}
		break
	}
	p.release(ds)
}

// releaseRunning releases the jobs of p whose handlers have not returned
// and cancels those handlers' contexts with ErrQueueStopped. A handler that
// put its success into the caller's transaction (CompleteTx) is cancelled
// but not released: that transaction decides its outcome. An outcome being
// written, or kept because its write failed, is not released: its handler
// finished, and Stop tries its write once more.
func (p *pool) releaseRunning() {
	var ds []*delivery
	for _, d := range p.claimed() {
		released := d.releaseBeforeOutcome()
		if !released && !d.inCallersTx() {
			continue
		}
		d.mu.Lock()
		if d.cancel != nil {
			d.cancel(ErrQueueStopped)
		}
		d.mu.Unlock()
		if released {
			ds = append(ds, d)
		}
	}
	p.release(ds)
}

func (r *runState) releaseRunning() {
	for _, p := range r.pools {
		p.releaseRunning()
	}
}
