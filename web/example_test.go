package web_test

import (
	"net/http"
	"os"
	"path/filepath"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// Mount the dashboard under /queue/ in the application's own mux.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", web.Handler(q, nil)))
	// http.ListenAndServe("127.0.0.1:8080", mux)
	// Output:
}
