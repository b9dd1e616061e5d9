package status

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/readonly"
)

const APIPath = "/api/v1/status"

// ViewPath serves the page's own View, not an API.
const ViewPath = "/status/view"

const refreshSeconds = 5

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string

	// What the template formats itself stays until the page's shape changes.
	page = template.Must(template.New("page").Funcs(template.FuncMap{
		"seconds":    func(s float64) string { return duration(secondsDuration(s)) },
		"chart":      newChart,
		"chartKinds": func() []string { return chartKinds },
	}).Parse(pageHTML))

	// The Content Security Policy allows these by hash and nothing else.
	csp = "default-src 'none'; script-src '" + hash(pageJS) + "'; style-src '" + hash(pageCSS) +
		"'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

type Handler struct {
	source *Source
	// Relative to the page, so that it works behind a proxy under a prefix;
	// "" when not served.
	metricsHref, apiHref, viewHref string
}

// NewHandler serves source's model; metricsPath is --web.telemetry-path.
func NewHandler(source *Source, metricsPath string, apiServed, viewServed bool) *Handler {
	h := &Handler{source: source, metricsHref: "./" + strings.TrimPrefix(metricsPath, "/")}
	if apiServed {
		h.apiHref = "." + APIPath
	}
	if viewServed {
		h.viewHref = "." + ViewPath
	}
	return h
}

// timeout is a backstop: each collector's reads are bounded already.
const timeout = 30 * time.Second

func (h *Handler) model(w http.ResponseWriter, r *http.Request) *Result {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	res, err := h.source.get(ctx)
	if err != nil {
		http.Error(w, "The status could not be collected; try again.", http.StatusServiceUnavailable)
		return nil
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	return res
}

func (h *Handler) API() http.Handler {
	return h.serveJSON(func(res *Result) []byte {
		if body := res.jsonBody(); len(body) > 0 {
			return append(body, '\n')
		}
		return nil
	})
}

func (h *Handler) View() http.Handler { return h.serveJSON((*Result).viewJSON) }

// serveJSON answers GET and HEAD only; an empty rendering is a 500.
func (h *Handler) serveJSON(render func(*Result) []byte) http.Handler {
	return readonly.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := h.model(w, r)
		if res == nil {
			return
		}
		body := render(res)
		if len(body) == 0 {
			http.Error(w, "The status could not be rendered.", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
}

// Page is complete without JavaScript.
func (h *Handler) Page() http.Handler {
	return readonly.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := h.model(w, r)
		if res == nil {
			return
		}
		var buf bytes.Buffer
		if err := h.render(&buf, res.Model, res.view()); err != nil {
			http.Error(w, "The status page could not be rendered.", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Write(buf.Bytes())
	}))
}

func (h *Handler) render(buf *bytes.Buffer, m Model, v View) error {
	return page.Execute(buf, struct {
		M                              Model
		V                              View
		MetricsHref, APIHref, ViewHref string
		Refresh                        int // ms
		RefreshSeconds                 int
		CSS                            template.CSS
		JS                             template.JS
	}{m, v, h.metricsHref, h.apiHref, h.viewHref, refreshSeconds * 1000, refreshSeconds, template.CSS(pageCSS), template.JS(pageJS)})
}
