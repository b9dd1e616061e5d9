// Package planfile reads the --plan.file of the exporter: a YAML list of
// named training runs, each with the fields of the plan command's flags.
//
//	# plans.yml
//	- name: llama70b-qlora
//	  model-size: 70B
//	  method: qlora
//	  gradient-checkpointing: true
//	  pack: 2048
//
// Errors say what is wrong and where (entry, line, field) but never repeat
// the file's path or its values: a misplaced line of a config file can hold
// a secret, and errors end up in logs.
package planfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/uma"
)

// Named is one planned run.
type Named struct {
	Name string
	Plan uma.Plan
}

// Limits: the file is configuration, and each plan is a label value.
const (
	maxFileBytes = 1 << 20
	maxPlans     = 64
)

// names are label values: short, printable, no spaces.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/+-]{0,63}$`)

// entry is one plan as written. Every value is read as a string and parsed
// by the same functions as the plan command's flags, so that the file and the
// command accept the same spellings (70B, 8e9, true).
type entry struct {
	Name                  string `yaml:"name"`
	ModelSize             string `yaml:"model-size"`
	Method                string `yaml:"method"`
	DType                 string `yaml:"dtype"`
	Optimizer             string `yaml:"optimizer"`
	LoRARank              string `yaml:"lora-rank"`
	LoRATargets           string `yaml:"lora-targets"`
	GradientCheckpointing string `yaml:"gradient-checkpointing"`
	Pack                  string `yaml:"pack"`
	Batch                 string `yaml:"batch"`
	Layers                string `yaml:"layers"`
	HiddenSize            string `yaml:"hidden-size"`
}

// Fields lists the keys a plan may have besides its name: the plan
// command's flag names, which a test holds the two to.
func Fields() []string {
	t := reflect.TypeFor[entry]()
	var keys []string
	for i := range t.NumField() {
		if k := t.Field(i).Tag.Get("yaml"); k != "name" {
			keys = append(keys, k)
		}
	}
	return keys
}

// Load reads and checks the plan file at path.
func Load(path string) ([]Named, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the file: %w", hostfs.WithoutPath(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the file: %w", hostfs.WithoutPath(err))
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	return Parse(data)
}

// Parse checks a plan file's contents and returns its plans in file order.
func Parse(data []byte) ([]Named, error) {
	// Check the document's shape on the node tree first: the decoder's own
	// type errors quote the offending value.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
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
	for i, item := range list.Content {
		if item.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("plan %d (line %d): expected fields such as name and model-size", i+1, item.Line)
		}
		for j := 1; j < len(item.Content); j += 2 {
			if v := item.Content[j]; v.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("plan %d (line %d): %s: expected a single value", i+1, v.Line, item.Content[j-1].Value)
			}
		}
	}

	// Strict decoding: an unknown field is a typo, refused rather than
	// silently left at its default.
	var entries []entry
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil {
		return nil, cleanYAML(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document; put every plan in one list")
	}

	plans := make([]Named, 0, len(entries))
	seen := map[string]int{}
	for i, e := range entries {
		where := fmt.Sprintf("plan %d (line %d)", i+1, list.Content[i].Line)
		switch {
		case e.Name == "":
			return nil, fmt.Errorf("%s: name missing", where)
		case !validName.MatchString(e.Name):
			return nil, fmt.Errorf("%s: name must be 1 to 64 letters, digits or _.:/+- starting with a letter or digit", where)
		case seen[e.Name] != 0:
			return nil, fmt.Errorf("%s: name already used by plan %d", where, seen[e.Name])
		}
		seen[e.Name] = i + 1
		p, err := e.plan()
		var fe *uma.FieldError
		if errors.As(err, &fe) {
			// Point at the field's own line where it is written.
			where = fmt.Sprintf("plan %d (line %d)", i+1, keyLine(list.Content[i], fe.Field))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		plans = append(plans, Named{Name: e.Name, Plan: p})
	}
	return plans, nil
}

// keyLine is the line of key in a mapping node, or the mapping's own line.
func keyLine(m *yaml.Node, key string) int {
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key {
			return m.Content[j].Line
		}
	}
	return m.Line
}

// plan parses the entry's fields and checks them together.
func (e entry) plan() (uma.Plan, error) {
	var p uma.Plan
	if e.ModelSize == "" {
		return p, &uma.FieldError{Field: "model-size", Err: errors.New("missing")}
	}
	if e.Method == "" {
		return p, &uma.FieldError{Field: "method", Err: errors.New("missing")}
	}
	for _, f := range []struct {
		name, value string
		set         func(string) error
	}{
		{"model-size", e.ModelSize, into(&p.Params, uma.ParseModelSize)},
		{"method", e.Method, into(&p.Method, uma.ParseMethod)},
		{"dtype", e.DType, into(&p.DType, uma.ParseDType)},
		{"optimizer", e.Optimizer, into(&p.Optimizer, uma.ParseOptimizer)},
		{"lora-rank", e.LoRARank, into(&p.LoRARank, uma.ParseRank)},
		{"lora-targets", e.LoRATargets, into(&p.LoRATargets, uma.ParseShapes)},
		{"gradient-checkpointing", e.GradientCheckpointing, into(&p.GradientCheckpointing, parseBool)},
		{"pack", e.Pack, into(&p.Pack, uma.ParsePack)},
		{"batch", e.Batch, into(&p.Batch, uma.ParseBatch)},
		{"layers", e.Layers, into(&p.Layers, uma.ParseLayers)},
		{"hidden-size", e.HiddenSize, into(&p.HiddenSize, uma.ParseHidden)},
	} {
		if f.value == "" {
			continue // not given: the default
		}
		if err := f.set(f.value); err != nil {
			return p, &uma.FieldError{Field: f.name, Err: err}
		}
	}
	return p.Complete()
}

// into returns a setter that parses a value into dst.
func into[T any](dst *T, parse func(string) (T, error)) func(string) error {
	return func(s string) error {
		v, err := parse(s)
		if err == nil {
			*dst = v
		}
		return err
	}
}

func parseBool(s string) (bool, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, errors.New("must be true or false")
	}
	return b, nil
}

// unknownField is the strict decoder's message for a key that is not a
// field ("field x not found in type planfile.entry"), Go type name included.
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// cleanYAML turns the decoder's errors into one line without Go type names.
func cleanYAML(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = unknownField.ReplaceAllString(m, "unknown field $1")
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}
