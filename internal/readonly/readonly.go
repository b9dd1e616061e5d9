// Package readonly refuses what is not a GET or HEAD: a scrape costs work
// that a POST has no business starting.
package readonly

import (
	"net/http"
	"time"
)

// Handler refuses a body too: the server reads a promised one before it
// answers, and a Content-Length whose bytes never come would hold a
// --web.max-requests slot until the read deadline.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method not allowed: only GET and HEAD.", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength != 0 {
			// -1 is chunked. Only a writer without deadlines fails here.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			w.Header().Set("Connection", "close")
			http.Error(w, "A request body is not accepted: every endpoint only reads.", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
