// Package browser holds the status page's test in headless Chromium. It is
// a module of its own so that chromedp stays out of the exporter's go.mod,
// which lists only what the binary links.
package browser
