// Package readonly is the one check that an HTTP endpoint of the exporter
// is only read: every endpoint serves GET and HEAD, and a scrape costs work
// that a POST or TRACE has no business starting.
package readonly

import (
	"net/http"
	"time"
)

// Handler answers 405, with the Allow header, to any method but GET and
// HEAD, 400 to a request that carries a body, and passes the others to
// next.
//
// No endpoint reads a body (RFC 9110, section 9.3.1: a GET's content has
// no defined meaning), and the server, to keep the connection, reads one
// it was promised before it answers: a Content-Length whose bytes never
// come would hold the request, and any --web.max-requests slot it had
// taken, until the read deadline. The refusal does not wait for the body: the
// read deadline ends at once and the connection is closed after the
// answer.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method not allowed: only GET and HEAD.", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength != 0 {
			// ContentLength is -1 for a chunked body. Neither call
			// fails on the server's own writers; an error only means
			// a writer that cannot, which then waits as before.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			w.Header().Set("Connection", "close")
			http.Error(w, "A request body is not accepted: every endpoint only reads.", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
