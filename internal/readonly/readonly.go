// Package readonly is the one check that an HTTP endpoint of the exporter
// is only read: every endpoint serves GET and HEAD, and a scrape costs work
// that a POST or TRACE has no business starting.
package readonly

import "net/http"

// Handler answers 405, with the Allow header, to any method but GET and
// HEAD, and passes those to next.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method not allowed: only GET and HEAD.", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}
