// Package jsonschema is test support: it checks a JSON document against
// the subset of JSON Schema (2020-12) that the project's schemas use —
// type, enum, properties, required, additionalProperties: false, items,
// oneOf and $ref into #/$defs. A keyword outside that subset is refused,
// so that a schema cannot silently say more than is checked.
package jsonschema

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Schema is a parsed schema document.
type Schema struct {
	root map[string]any
}

var known = []string{"$schema", "$id", "title", "description", "format", "$defs",
	"type", "enum", "properties", "required", "additionalProperties", "items", "oneOf", "$ref"}

// Parse reads a schema document.
func Parse(data []byte) (*Schema, error) {
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	s := &Schema{root: root}
	return s, s.checkKeywords(root, "#")
}

func (s *Schema) checkKeywords(node map[string]any, at string) error {
	for k, v := range node {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%s: keyword %q is not supported", at, k)
		}
		switch k {
		case "$defs", "properties":
			for name, sub := range v.(map[string]any) {
				if err := s.checkKeywords(sub.(map[string]any), at+"/"+k+"/"+name); err != nil {
					return err
				}
			}
		case "items":
			if err := s.checkKeywords(v.(map[string]any), at+"/items"); err != nil {
				return err
			}
		case "oneOf":
			for i, sub := range v.([]any) {
				if err := s.checkKeywords(sub.(map[string]any), fmt.Sprintf("%s/oneOf/%d", at, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Validate checks the JSON document data against the schema and returns
// every violation, each with its place in the document.
func (s *Schema) Validate(data []byte) []string {
	var doc any
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return []string{err.Error()}
	}
	var errs []string
	s.check(s.root, doc, "$", &errs)
	return errs
}

func (s *Schema) check(node map[string]any, v any, at string, errs *[]string) {
	fail := func(format string, args ...any) { *errs = append(*errs, at+": "+fmt.Sprintf(format, args...)) }
	if ref, ok := node["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		def, ok := s.root["$defs"].(map[string]any)[name].(map[string]any)
		if !found || !ok {
			fail("unknown $ref %s", ref)
			return
		}
		s.check(def, v, at, errs)
	}
	if t, ok := node["type"]; ok && !typeMatches(t, v) {
		fail("%s, want type %v", describe(v), t)
		return
	}
	if enum, ok := node["enum"].([]any); ok {
		if !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) && typeOf(e) == typeOf(v) }) {
			fail("%v is not one of %v", v, enum)
		}
	}
	if one, ok := node["oneOf"].([]any); ok {
		matched := 0
		for _, sub := range one {
			var subErrs []string
			s.check(sub.(map[string]any), v, at, &subErrs)
			if len(subErrs) == 0 {
				matched++
			}
		}
		if matched != 1 {
			fail("%s matches %d of oneOf's schemas, want 1", describe(v), matched)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := node["properties"].(map[string]any)
		for _, r := range asStrings(node["required"]) {
			if _, ok := obj[r]; !ok {
				fail("required %q missing", r)
			}
		}
		for k, sub := range obj {
			p, ok := props[k].(map[string]any)
			switch {
			case ok:
				s.check(p, sub, at+"."+k, errs)
			case node["additionalProperties"] == false:
				fail("%q is not in the schema", k)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := node["items"].(map[string]any); ok {
			for i, e := range arr {
				s.check(items, e, fmt.Sprintf("%s[%d]", at, i), errs)
			}
		}
	}
}

func asStrings(v any) []string {
	var out []string
	for _, e := range asSlice(v) {
		out = append(out, e.(string))
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func typeMatches(t any, v any) bool {
	if list, ok := t.([]any); ok {
		return slices.ContainsFunc(list, func(e any) bool { return typeMatches(e, v) })
	}
	want := t.(string)
	got := typeOf(v)
	return got == want || want == "number" && got == "integer"
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && !strings.ContainsAny(x.String(), ".eE") {
			return "integer"
		}
		return "number"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func describe(v any) string {
	if t := typeOf(v); t != "object" && t != "array" {
		return fmt.Sprintf("%s %v", t, v)
	}
	return typeOf(v)
}
