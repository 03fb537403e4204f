package main

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"sigs.k8s.io/yaml"
)

const schemaJSON = `{
  "type": "object",
  "properties": {
    "role": {"description": "Which role.", "type": "string", "enum": ["primary", "secondary"]},
    "manager": {
      "type": "object",
      "properties": {
        "replicas": {"description": "How many | pipes.", "type": "integer", "minimum": 1},
        "qps": {"description": "Rate.", "type": "number", "exclusiveMinimum": 0},
        "resources": {"description": "Resources.", "type": "object"},
        "image": {"type": "object", "properties": {"tag": {"description": "Tag.", "type": ["string", "null"]}}}
      }
    }
  }
}`

const valuesYAML = `
manager:
  image:
    tag: ""
  replicas: 2
  qps: 1.5
  resources:
    limits: {memory: 512Mi}
role: primary
`

func table(t *testing.T, schema, values string) ([]Value, error) {
	t.Helper()
	var s Schema
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatalf("schema: %v", err)
	}
	var v map[string]any
	if err := yaml.Unmarshal([]byte(values), &v); err != nil {
		t.Fatalf("values: %v", err)
	}
	return Table(&s, v)
}

func TestTableFollowsTheSchemasOrderWithTheDefaults(t *testing.T) {
	rows, err := table(t, schemaJSON, valuesYAML)
	if err != nil {
		t.Fatal(err)
	}
	want := []Value{
		{Key: "role", Type: "one of primary, secondary", Default: `"primary"`, Description: "Which role."},
		{Key: "manager.replicas", Type: "integer (≥ 1)", Default: "2", Description: "How many | pipes."},
		{Key: "manager.qps", Type: "number (> 0)", Default: "1.5", Description: "Rate."},
		{Key: "manager.resources", Type: "object", Default: `{"limits":{"memory":"512Mi"}}`, Description: "Resources."},
		{Key: "manager.image.tag", Type: "string or null", Default: `""`, Description: "Tag."},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows %+v, want %d", len(rows), rows, len(want))
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, rows[i], want[i])
		}
	}
}

func TestTableRefusesValuesTheSchemaAndValuesDisagreeOn(t *testing.T) {
	tests := map[string]struct {
		schema, values string
		want           string
	}{
		"a value without a schema entry": {
			schema: `{"properties": {"a": {"description": "A.", "type": "string"}}}`,
			values: "a: x\nb: y\n",
			want:   "b: in values.yaml but not in values.schema.json",
		},
		"a nested value without a schema entry": {
			schema: `{"properties": {"m": {"type": "object", "properties": {"a": {"description": "A.", "type": "string"}}}}}`,
			values: "m: {a: x, typo: 1}\n",
			want:   "m.typo: in values.yaml but not in values.schema.json",
		},
		"a schema entry without a default": {
			schema: `{"properties": {"a": {"description": "A.", "type": "string"}, "b": {"description": "B.", "type": "string"}}}`,
			values: "a: x\n",
			want:   "b: in values.schema.json but has no default in values.yaml",
		},
		"a value without a description": {
			schema: `{"properties": {"a": {"type": "string"}}}`,
			values: "a: x\n",
			want:   "a: no description",
		},
		"an object in the schema that values.yaml sets to a scalar": {
			schema: `{"properties": {"m": {"type": "object", "properties": {"a": {"description": "A.", "type": "string"}}}}}`,
			values: "m: 3\n",
			want:   "m: an object in values.schema.json, float64 in values.yaml",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := table(t, tc.schema, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRenderWritesTheTemplateWithTheChartAndItsValues(t *testing.T) {
	chart := fstest.MapFS{
		"Chart.yaml":         {Data: []byte("name: demo\nversion: 1.2.3\nappVersion: \"4.5\"\ndescription: A demo.\n")},
		"values.yaml":        {Data: []byte(valuesYAML)},
		"values.schema.json": {Data: []byte(schemaJSON)},
		"README.md.gotmpl": {Data: []byte("# {{ .Chart.Name }} {{ .Chart.Version }} ({{ .Chart.AppVersion }})\n" +
			"{{ range .Values }}| {{ .Key }} | {{ cell .Description }} |\n{{ end }}")},
	}
	got, err := render(chart)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# demo 1.2.3 (4.5)\n", "| role | Which role. |\n", `| manager.replicas | How many \| pipes. |` + "\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("README lacks %q:\n%s", want, got)
		}
	}

	chart["README.md.gotmpl"] = &fstest.MapFile{Data: []byte("{{ .Chart.Title }}")}
	if _, err := render(chart); err == nil {
		t.Error("a template naming an unknown field rendered")
	}
	delete(chart, "values.schema.json")
	if _, err := render(chart); err == nil || !strings.Contains(err.Error(), "values.schema.json") {
		t.Errorf("got %v, want an error naming the missing values.schema.json", err)
	}
}
