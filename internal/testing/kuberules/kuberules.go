// Package kuberules turns the Prometheus rule files of rules/ into one
// Prometheus Operator PrometheusRule, so the Kubernetes example is generated
// from the rules Prometheus loads and the two cannot drift apart.
package kuberules

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"go.yaml.in/yaml/v3"
)

// File is one rule file: its base name and content.
type File struct {
	Name string
	Data []byte
}

// Header opens the generated file.
const Header = "Generated from rules/*.yml by `make kubernetes-rules`: do not edit."

// Object names and labels of the generated PrometheusRule; they match the
// other manifests in examples/kubernetes.
const (
	name      = "spark-exporter"
	namespace = "monitoring"
	appLabel  = "app.kubernetes.io/name"
)

// ReadDir reads dir's *.yml files, sorted by name; a missing dir has none.
func ReadDir(dir string) ([]File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	files := make([]File, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: filepath.Base(p), Data: data})
	}
	return files, nil
}

// PrometheusRule returns the manifest holding every group of files, in file
// name order and, within a file, in its own order. Comments and block styles
// of the rule files are kept. A file that is not a rule file (anything but a
// "groups" list at its top) or a group name used twice is an error: the
// Operator loads all groups as one file, where names must be unique.
func PrometheusRule(files []File) ([]byte, error) {
	files = append([]File(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })

	groups := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	seen := map[string]string{}
	for _, f := range files {
		gs, err := fileGroups(f)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			gname := value(g, "name")
			if gname == "" {
				return nil, fmt.Errorf("%s: a group has no name", f.Name)
			}
			if other, dup := seen[gname]; dup {
				return nil, fmt.Errorf("group %q is in both %s and %s", gname, other, f.Name)
			}
			seen[gname] = f.Name
			groups.Content = append(groups.Content, g)
		}
	}
	if len(groups.Content) == 0 {
		groups.Style = yaml.FlowStyle // groups: []
	}

	doc := mapping(
		"apiVersion", scalar("monitoring.coreos.com/v1"),
		"kind", scalar("PrometheusRule"),
		"metadata", mapping(
			"name", scalar(name),
			"namespace", scalar(namespace),
			"labels", mapping(appLabel, scalar(name)),
		),
		"spec", mapping("groups", groups),
	)
	doc.HeadComment = Header

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fileGroups returns the group nodes of one rule file.
func fileGroups(f File) ([]*yaml.Node, error) {
	// Decoding into Go values first rejects what a Node tree lets through,
	// such as a key given twice, which Prometheus would refuse too.
	var plain any
	if err := yaml.Unmarshal(f.Data, &plain); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(f.Data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	if doc.Kind == 0 { // empty file: Prometheus loads it as no groups
		return nil, nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a rule file (want a mapping with groups)", f.Name)
	}
	var groups []*yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], top.Content[i+1]
		if key.Value != "groups" {
			return nil, fmt.Errorf("%s:%d: unexpected key %q in a rule file", f.Name, key.Line, key.Value)
		}
		if val.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("%s:%d: groups is not a list", f.Name, val.Line)
		}
		for _, g := range val.Content {
			if g.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("%s:%d: a group is not a mapping", f.Name, g.Line)
			}
			groups = append(groups, g)
		}
	}
	return groups, nil
}

// value returns the scalar value under key in mapping m.
func value(m *yaml.Node, key string) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value
		}
	}
	return ""
}

func scalar(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

func mapping(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Content = append(m.Content, scalar(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return m
}
