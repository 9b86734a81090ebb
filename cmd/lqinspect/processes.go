package main

import (
	"fmt"
	"strconv"
	"strings"
)

func (a *app) processes(args []string) error {
	fs := a.newFlags("processes", "FILE", `
Print the processes working the queue, one row each: a queue started with
Start registers itself and writes a heartbeat every
Options.HeartbeatInterval (10s by default). STATUS is "dead" once the last
heartbeat is more than 3 intervals old (a process killed, or its host
lost); a clean Stop removes its row, and dead rows are deleted an hour
(Options.ProcessRetention) after their last heartbeat. RUNNING is how many
jobs the process held at its last heartbeat, JOBS the ids of some of them:
for a dead process, the jobs it held when it died ("lqinspect show ID" says
who holds each now).`)
	fs.jsonFlag()
	fs.fileFlags(false)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one FILE, got %d arguments", len(pos))
	}
	f, err := a.open(pos[0], fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	ps, err := f.q.Processes(a.ctx)
	if err != nil {
		return err
	}
	if fs.json {
		return writeList(a.stdout, ps)
	}
	now := f.now()
	var rows [][]string
	for _, p := range ps {
		status := "alive"
		if !p.Alive {
			status = "dead"
		}
		var queues []string
		for _, q := range p.Queues {
			queues = append(queues, q.Name+" ("+strings.Join(q.Kinds, ", ")+")")
		}
		rows = append(rows, []string{strconv.FormatInt(p.ID, 10), p.Host, strconv.Itoa(p.PID), status,
			relTime(p.StartedAt, now), relTime(p.HeartbeatAt, now), strconv.Itoa(p.Running), jobList(p.Jobs, 5),
			strings.Join(queues, "; "), orNone(p.Version)})
	}
	return table(a.stdout, "no processes: no queue on this database is started (a clean Stop removes its row)",
		[]string{"ID", "HOST", "PID", "STATUS", "STARTED", "HEARTBEAT", "RUNNING", "JOBS", "QUEUES (KINDS)", "VERSION"}, rows)
}

// jobList prints up to n ids of ids, then how many more there are.
func jobList(ids []int64, n int) string {
	if len(ids) == 0 {
		return none
	}
	var b strings.Builder
	for i, id := range ids[:min(n, len(ids))] {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	if len(ids) > n {
		fmt.Fprintf(&b, " +%d", len(ids)-n)
	}
	return b.String()
}
