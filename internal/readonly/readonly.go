// Package readonly is the one check that an HTTP endpoint of the exporter
// is only read: every endpoint serves GET and HEAD, and a scrape costs work
// that a POST or TRACE has no business starting.
package readonly

import (
	"net/http"
	"time"
)

// Handler answers 405, with the Allow header, to any method but GET and
// HEAD, 400 to a request that carries a body, and passes the others to next.
//
// No endpoint reads a body (RFC 9110, section 9.3.1), but the server reads a
// promised one before it answers, to keep the connection: a Content-Length
// whose bytes never come would hold the request, and its --web.max-requests
// slot, until the read deadline. So the refusal ends that deadline at once
// and closes the connection.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method not allowed: only GET and HEAD.", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength != 0 {
			// ContentLength is -1 for a chunked body. The error is ignored: only a
			// writer that cannot set deadlines fails, and that one waits as before.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			w.Header().Set("Connection", "close")
			http.Error(w, "A request body is not accepted: every endpoint only reads.", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
