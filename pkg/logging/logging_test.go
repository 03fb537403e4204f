package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestNewWritesAtTheChosenLevelAndFormat(t *testing.T) {
	tests := map[string]struct {
		opts      Options
		wantInfo  bool
		wantDebug bool
		json      bool
	}{
		"info text hides debug":  {opts: Options{Level: "info", Format: "text"}, wantInfo: true},
		"debug shows V(1)":       {opts: Options{Level: "debug"}, wantInfo: true, wantDebug: true},
		"error hides info":       {opts: Options{Level: "error"}},
		"json lines are objects": {opts: Options{Format: "json"}, wantInfo: true, json: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := New(tc.opts, &buf)
			if err != nil {
				t.Fatal(err)
			}
			log.Info("Started", "cluster", "secondary1")
			log.V(Debug).Info("Probing", "cluster", "secondary1")
			log.Error(errors.New("boom"), "Probe failed")
			out := buf.String()
			if got := strings.Contains(out, "Started"); got != tc.wantInfo {
				t.Errorf("info logged = %v, want %v:\n%s", got, tc.wantInfo, out)
			}
			if got := strings.Contains(out, "Probing"); got != tc.wantDebug {
				t.Errorf("debug logged = %v, want %v:\n%s", got, tc.wantDebug, out)
			}
			if !strings.Contains(out, "boom") {
				t.Errorf("error not logged:\n%s", out)
			}
			if tc.json {
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					var m map[string]any
					if err := json.Unmarshal([]byte(line), &m); err != nil {
						t.Errorf("line is not JSON: %q: %v", line, err)
					}
				}
			}
		})
	}
}

func TestNewRefusesUnknownLevelAndFormat(t *testing.T) {
	for _, o := range []Options{{Level: "loud"}, {Format: "xml"}} {
		if _, err := New(o, &bytes.Buffer{}); err == nil {
			t.Errorf("New(%+v) = nil error, want one", o)
		}
	}
}
