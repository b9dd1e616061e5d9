package plan

// The plan file is a YAML list of named plans keyed by Fields. Its errors
// never repeat the path, a value or a key: a misplaced line can hold a secret.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// Named is one planned run.
type Named struct {
	Name string
	Plan Plan
}

const (
	maxFileBytes = 1 << 20
	maxPlans     = 64
)

// validName: a name is a label value.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/+-]{0,63}$`)

// LoadFile reads and checks the plan file.
func LoadFile(path string) ([]Named, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the file: %w", redact.WithoutPath(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the file: %w", redact.WithoutPath(err))
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	return ParseFile(data)
}

// entry is one plan as written, with the lines errors point at.
type entry struct {
	line   int // of the plan's first key
	values []keyValue
}

type keyValue struct {
	key, value string
	line       int // of the key
}

var fieldsByName = func() map[string]Field {
	m := make(map[string]Field, len(Fields))
	for _, f := range Fields {
		m[f.Name] = f
	}
	return m
}()

var knownFields = func() string {
	names := make([]string, len(Fields))
	for i, f := range Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}()

// ParseFile checks a plan file's contents.
func ParseFile(data []byte) ([]Named, error) {
	entries, err := readEntries(data)
	if err != nil {
		return nil, err
	}
	plans := make([]Named, 0, len(entries))
	seen := map[string]int{}
	for i, e := range entries {
		where := fmt.Sprintf("plan %d (line %d)", i+1, e.line)
		name := e.get("name")
		switch {
		case name == "":
			return nil, fmt.Errorf("%s: name missing", where)
		case !validName.MatchString(name):
			return nil, fmt.Errorf("%s: name must be 1 to 64 letters, digits or _.:/+- starting with a letter or digit", where)
		case seen[name] != 0:
			return nil, fmt.Errorf("%s: name already used by plan %d", where, seen[name])
		}
		seen[name] = i + 1
		p, err := e.plan()
		var fe *FieldError
		if errors.As(err, &fe) {
			where = fmt.Sprintf("plan %d (line %d)", i+1, e.keyLine(fe.Field))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		plans = append(plans, Named{Name: name, Plan: p})
	}
	return plans, nil
}

// readEntries refuses anything but one list of mappings from known keys to
// single values. It walks the node tree: the decoder's type errors quote values.
func readEntries(data []byte) ([]entry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); errors.Is(err, io.EOF) {
		return nil, errors.New("no plans: the file is empty")
	} else if err != nil {
		return nil, cleanYAML(err)
	}
	if len(root.Content) == 0 {
		return nil, errors.New("no plans: the file is empty")
	}
	list := root.Content[0]
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: expected a list of plans (lines starting with \"- name:\")", list.Line)
	}
	if len(list.Content) == 0 {
		return nil, errors.New("no plans: the list is empty")
	}
	if len(list.Content) > maxPlans {
		return nil, fmt.Errorf("%d plans, more than %d", len(list.Content), maxPlans)
	}
	entries := make([]entry, len(list.Content))
	for i, item := range list.Content {
		if item.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("plan %d (line %d): expected fields such as name and model-size", i+1, item.Line)
		}
		entries[i].line = item.Line
		for j := 1; j < len(item.Content); j += 2 {
			if v := item.Content[j]; v.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("plan %d (line %d, column %d): expected a single value", i+1, v.Line, v.Column)
			}
		}
	}
	// Repeated keys before unknown ones: the first error is the decoder's.
	for _, item := range list.Content {
		first := map[string]int{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			k := item.Content[j]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
				return nil, fmt.Errorf("line %d, column %d: expected a field name", k.Line, k.Column)
			}
			if at, ok := first[k.Value]; ok {
				return nil, fmt.Errorf("line %d, column %d: a field given twice (first at line %d)", k.Line, k.Column, at)
			}
			first[k.Value] = k.Line
		}
	}
	for i, item := range list.Content {
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, v := item.Content[j], item.Content[j+1]
			if _, known := fieldsByName[k.Value]; k.Value != "name" && !known {
				return nil, fmt.Errorf("line %d, column %d: unknown field (known: name, %s)", k.Line, k.Column, knownFields)
			}
			// Decode takes YAML's quotes, block scalars and ~ as the decoder does.
			var text string
			if err := v.Decode(&text); err != nil {
				return nil, cleanYAML(err)
			}
			entries[i].values = append(entries[i].values, keyValue{key: k.Value, value: text, line: k.Line})
		}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document; put every plan in one list")
	}
	return entries, nil
}

func (e entry) get(key string) string {
	for _, kv := range e.values {
		if kv.key == key {
			return kv.value
		}
	}
	return ""
}

func (e entry) keyLine(key string) int {
	for _, kv := range e.values {
		if kv.key == key {
			return kv.line
		}
	}
	return e.line
}

func (e entry) plan() (Plan, error) {
	var p Plan
	for _, f := range Fields {
		if f.Required && e.get(f.Name) == "" {
			return p, &FieldError{Field: f.Name, Err: errors.New("missing")}
		}
	}
	for _, f := range Fields {
		v := e.get(f.Name)
		if v == "" {
			continue // not given: the default
		}
		if err := f.Set(&p, v); err != nil {
			return p, &FieldError{Field: f.Name, Err: err}
		}
	}
	return p.Complete()
}

// cleanYAML: one line without Go type names.
func cleanYAML(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}
