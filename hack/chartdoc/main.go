// Command chartdoc writes a Helm chart's README.md from its README.md.gotmpl, Chart.yaml,
// values.schema.json (each value's type and description) and values.yaml (each value's default).
// It fails when the two disagree: a value without a schema entry, a schema entry without a default
// in values.yaml, or a value without a description. `make generate` runs it for charts/flotilla.
//
// Usage:
//
//	go run ./hack/chartdoc -chart charts/flotilla
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

func main() {
	chart := flag.String("chart", "charts/flotilla", "the chart's directory")
	flag.Parse()
	if err := run(*chart); err != nil {
		fmt.Fprintf(os.Stderr, "chartdoc: %v\n", err)
		os.Exit(1)
	}
}

// run writes <chart>/README.md.
func run(chart string) error {
	readme, err := render(os.DirFS(chart))
	if err != nil {
		return fmt.Errorf("chart %s: %w", chart, err)
	}
	return os.WriteFile(filepath.Join(chart, "README.md"), readme, 0o644)
}

// Chart is what README.md.gotmpl sees of Chart.yaml.
type Chart struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion"`
	KubeVersion string `json:"kubeVersion"`
}

// Value is one row of the values table: a leaf of the schema with its default.
type Value struct {
	Key         string // dotted path, e.g. manager.image.tag
	Type        string // e.g. integer (≥ 1), one of primary, secondary
	Default     string // JSON of the default in values.yaml
	Description string
}

// render produces the README from the chart's files.
func render(chart fs.FS) ([]byte, error) {
	files := map[string][]byte{}
	for _, name := range []string{"Chart.yaml", "values.yaml", "values.schema.json", "README.md.gotmpl"} {
		raw, err := fs.ReadFile(chart, name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		files[name] = raw
	}
	var meta Chart
	if err := yaml.Unmarshal(files["Chart.yaml"], &meta); err != nil {
		return nil, fmt.Errorf("decoding Chart.yaml: %w", err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(files["values.yaml"], &defaults); err != nil {
		return nil, fmt.Errorf("decoding values.yaml: %w", err)
	}
	var schema Schema
	if err := json.Unmarshal(files["values.schema.json"], &schema); err != nil {
		return nil, fmt.Errorf("decoding values.schema.json: %w", err)
	}
	values, err := Table(&schema, defaults)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("README.md.gotmpl").Option("missingkey=error").Funcs(template.FuncMap{"cell": cell}).
		Parse(string(files["README.md.gotmpl"]))
	if err != nil {
		return nil, fmt.Errorf("parsing README.md.gotmpl: %w", err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]any{"Chart": meta, "Values": values}); err != nil {
		return nil, fmt.Errorf("executing README.md.gotmpl: %w", err)
	}
	return out.Bytes(), nil
}

// Schema is the part of a JSON schema the table shows, with properties in the file's order.
type Schema struct {
	Description      string     `json:"description"`
	Type             any        `json:"type"` // a name or a list of names
	Enum             []any      `json:"enum"`
	Minimum          *float64   `json:"minimum"`
	ExclusiveMinimum *float64   `json:"exclusiveMinimum"`
	Properties       Properties `json:"properties"`
}

// Property is one named entry of a schema's properties.
type Property struct {
	Name   string
	Schema *Schema
}

// Properties keeps a JSON object's members in order.
type Properties []Property

// UnmarshalJSON reads the members of the object in the order they are written.
func (p *Properties) UnmarshalJSON(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("properties: want an object, got %v (%w)", tok, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("properties: %w", err)
		}
		name, _ := tok.(string)
		s := &Schema{}
		if err := dec.Decode(s); err != nil {
			return fmt.Errorf("properties.%s: %w", name, err)
		}
		*p = append(*p, Property{Name: name, Schema: s})
	}
	return nil
}

// Table lists the leaves of schema (values without properties of their own) in the schema's order,
// each with its default from defaults. The schema and the defaults must name the same values, and
// every leaf needs a description.
func Table(schema *Schema, defaults map[string]any) ([]Value, error) {
	var rows []Value
	var errs []error
	walk(schema, defaults, "", &rows, &errs)
	return rows, errors.Join(errs...)
}

func walk(s *Schema, defaults map[string]any, prefix string, rows *[]Value, errs *[]error) {
	named := map[string]bool{}
	for _, p := range s.Properties {
		named[p.Name] = true
		key := prefix + p.Name
		def, ok := defaults[p.Name]
		if !ok {
			*errs = append(*errs, fmt.Errorf("%s: in values.schema.json but has no default in values.yaml", key))
			continue
		}
		if len(p.Schema.Properties) > 0 {
			sub, isMap := def.(map[string]any)
			if !isMap {
				*errs = append(*errs, fmt.Errorf("%s: an object in values.schema.json, %T in values.yaml", key, def))
				continue
			}
			walk(p.Schema, sub, key+".", rows, errs)
			continue
		}
		if strings.TrimSpace(p.Schema.Description) == "" {
			*errs = append(*errs, fmt.Errorf("%s: no description in values.schema.json", key))
		}
		*rows = append(*rows, Value{Key: key, Type: typeOf(p.Schema), Default: defaultOf(def), Description: p.Schema.Description})
	}
	var extra []string
	for name := range defaults {
		if !named[name] {
			extra = append(extra, prefix+name)
		}
	}
	sort.Strings(extra)
	for _, key := range extra {
		*errs = append(*errs, fmt.Errorf("%s: in values.yaml but not in values.schema.json", key))
	}
}

// typeOf is a value's type as the table shows it: its enum, or its type with any minimum.
func typeOf(s *Schema) string {
	if len(s.Enum) > 0 {
		names := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			names[i] = fmt.Sprint(e)
		}
		return "one of " + strings.Join(names, ", ")
	}
	var t string
	switch v := s.Type.(type) {
	case string:
		t = v
	case []any:
		parts := make([]string, len(v))
		for i, p := range v {
			parts[i] = fmt.Sprint(p)
		}
		t = strings.Join(parts, " or ")
	}
	switch {
	case s.Minimum != nil:
		t += fmt.Sprintf(" (≥ %v)", *s.Minimum)
	case s.ExclusiveMinimum != nil:
		t += fmt.Sprintf(" (> %v)", *s.ExclusiveMinimum)
	}
	return t
}

// defaultOf is the default as compact JSON, so strings, maps and lists read alike.
func defaultOf(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// cell makes text fit in one Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
