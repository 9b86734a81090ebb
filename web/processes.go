package web

import (
	"net/http"

	"github.com/litequeue/litequeue"
)

// The processes page: every process working the queues (Queue.Processes),
// alive or dead, with the jobs it held at its last heartbeat.

type processesData struct {
	Processes []litequeue.ProcessInfo
	Dead      int
}

func (s *server) processes(w http.ResponseWriter, r *http.Request) {
	ps, err := s.q.Processes(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d := processesData{Processes: ps}
	for _, p := range ps {
		if !p.Alive {
			d.Dead++
		}
	}
	s.render(w, r, http.StatusOK, "processes", &page{Title: "Processes", Nav: "processes", Data: d})
}
