package rulesxform

// The Alertmanager configuration (examples/alertmanager.yml) as the
// end-to-end test runs it: the routes, matchers and inhibitions as shipped,
// with two changes only —
//
//   - every webhook receiver's URL points at a server the test runs, one
//     path per receiver (BASE/RECEIVER), so the test sees what each
//     receiver was sent;
//   - group_wait, group_interval and repeat_interval, at every level of the
//     route tree, are divided by the same factor as the rules' durations,
//     so notification timing keeps its proportion to the alerts' `for:`.
//
// Receivers of other kinds (email, Slack, PagerDuty, …) cannot be pointed
// at a local server: they are an error, not something to leave in place.

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Alertmanager's defaults for the root route, written out when the file
// leaves one unset so that it too is shortened.
var timingDefaults = []struct{ key, value string }{
	{"group_wait", "30s"},
	{"group_interval", "5m"},
	{"repeat_interval", "4h"},
}

// Alertmanager returns the Alertmanager configuration src with every
// webhook URL replaced by base + "/" + the receiver's name, and its
// notification timing divided by factor.
func Alertmanager(src []byte, base string, factor int) ([]byte, error) {
	if _, err := url.Parse(base); err != nil || !strings.HasPrefix(base, "http") {
		return nil, fmt.Errorf("webhook base %q is not an http URL", base)
	}
	doc, err := parseMapping(src)
	if err != nil {
		return nil, fmt.Errorf("not an Alertmanager configuration: %w", err)
	}
	top := doc.Content[0]

	route := value(top, "route")
	if route == nil || route.Kind != yaml.MappingNode {
		return nil, errors.New("no route")
	}
	for _, d := range timingDefaults {
		if value(route, d.key) == nil {
			route.Content = append(route.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Value: d.key},
				&yaml.Node{Kind: yaml.ScalarNode, Value: d.value})
		}
	}
	if err := shortenRoute(route, factor, "route"); err != nil {
		return nil, err
	}

	receivers := value(top, "receivers")
	if receivers == nil || receivers.Kind != yaml.SequenceNode {
		return nil, errors.New("no list of receivers")
	}
	for _, r := range receivers.Content {
		if err := retargetReceiver(r, base); err != nil {
			return nil, err
		}
	}

	return encode(doc)
}

// shortenRoute divides the timing of route and of its child routes.
func shortenRoute(route *yaml.Node, factor int, where string) error {
	if route.Kind != yaml.MappingNode {
		return fmt.Errorf("%s is not a mapping", where)
	}
	for _, d := range timingDefaults {
		v := value(route, d.key)
		if v == nil {
			continue // inherited from the parent, already shortened
		}
		out, err := ShortenDuration(v.Value, factor)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", where, d.key, err)
		}
		v.Value = out
	}
	if children := value(route, "routes"); children != nil {
		for i, c := range children.Content {
			if err := shortenRoute(c, factor, fmt.Sprintf("%s.routes[%d]", where, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func retargetReceiver(r *yaml.Node, base string) error {
	if r.Kind != yaml.MappingNode {
		return errors.New("a receiver is not a mapping")
	}
	name := ""
	if v := value(r, "name"); v != nil {
		name = v.Value
	}
	if name == "" {
		return errors.New("a receiver has no name")
	}
	for i := 0; i+1 < len(r.Content); i += 2 {
		key := r.Content[i].Value
		if !strings.HasSuffix(key, "_configs") {
			continue
		}
		if key != "webhook_configs" {
			return fmt.Errorf("receiver %s: %s cannot be pointed at the test; only webhook_configs can", name, key)
		}
		for _, w := range r.Content[i+1].Content {
			if w.Kind != yaml.MappingNode {
				return fmt.Errorf("receiver %s: a webhook is not a mapping", name)
			}
			// url_file would name a file on the machine the example was
			// written for; the test's URL replaces it.
			removeKey(w, "url_file")
			target := strings.TrimRight(base, "/") + "/" + url.PathEscape(name)
			if v := value(w, "url"); v != nil {
				v.Value = target
			} else {
				w.Content = append(w.Content,
					&yaml.Node{Kind: yaml.ScalarNode, Value: "url"},
					&yaml.Node{Kind: yaml.ScalarNode, Value: target})
			}
		}
	}
	return nil
}

func removeKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}
