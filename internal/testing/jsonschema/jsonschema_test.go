package jsonschema

import (
	"strings"
	"testing"
)

const schema = `{"type":"object","additionalProperties":false,"required":["a","b"],
 "properties":{"a":{"type":"integer"},"b":{"oneOf":[{"type":"null"},{"$ref":"#/$defs/s"}]},"c":{"type":"array","items":{"enum":["x","y"]}}},
 "$defs":{"s":{"type":"string"}}}`

func TestValidate(t *testing.T) {
	s, err := Parse([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc, fault string // fault: "" when valid
	}{
		{`{"a":1,"b":null}`, ""},
		{`{"a":1,"b":"s","c":["x","y"]}`, ""},
		{`{"a":1.5,"b":null}`, "$.a: number 1.5, want type integer"},
		{`{"a":1}`, `required "b" missing`},
		{`{"a":1,"b":2}`, "$.b: integer 2 matches 0 of oneOf"},
		{`{"a":1,"b":null,"d":0}`, `"d" is not in the schema`},
		{`{"a":1,"b":null,"c":["z"]}`, "$.c[0]: z is not one of"},
	} {
		errs := strings.Join(s.Validate([]byte(tc.doc)), "\n")
		if tc.fault == "" && errs != "" || !strings.Contains(errs, tc.fault) {
			t.Errorf("%s: %q, want %q", tc.doc, errs, tc.fault)
		}
	}
	if _, err := Parse([]byte(`{"type":"object","minimum":1}`)); err == nil {
		t.Error("a keyword outside the subset was accepted")
	}
}
