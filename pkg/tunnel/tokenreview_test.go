package tunnel

import "testing"

func TestAgentCluster(t *testing.T) {
	for user, want := range map[string]string{
		"system:serviceaccount:flotilla-system:flotilla-agent-secondary2": "secondary2",
		"system:serviceaccount:flotilla-system:flotilla-agent-":           "",
		"system:serviceaccount:flotilla-system:flotilla-agent-Bad_Name":   "",
		"system:serviceaccount:default:flotilla-agent-secondary2":         "",
		"system:serviceaccount:flotilla-system:flotilla":                  "",
		"admin": "",
	} {
		got, err := AgentCluster(user, "flotilla-system")
		if got != want || (want == "") != (err != nil) {
			t.Errorf("AgentCluster(%q) = %q, %v; want %q", user, got, err, want)
		}
	}
}
