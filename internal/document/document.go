package document

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Print writes doc as one document in format, json or yaml. YAML is the JSON of the same value
// turned into YAML (sigs.k8s.io/yaml), so both formats carry the same fields under the same names.
func Print(out io.Writer, format string, doc any) error {
	var raw []byte
	var err error
	switch format {
	case "json":
		raw, err = json.MarshalIndent(doc, "", "  ")
		raw = append(raw, '\n')
	case "yaml":
		raw, err = yaml.Marshal(doc)
	default:
		return fmt.Errorf("--output %q: want json or yaml", format)
	}
	if err != nil {
		return fmt.Errorf("encoding the %s document: %w", format, err)
	}
	_, err = out.Write(raw)
	return err
}
