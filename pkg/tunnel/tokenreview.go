package tunnel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// AgentServiceAccountPrefix names an agent's identity in the primary: the ServiceAccount
// <namespace>/flotilla-agent-<cluster> is cluster <cluster>'s agent, and no other's.
const AgentServiceAccountPrefix = "flotilla-agent-"

// TokenReviewer authenticates agents with the primary's TokenReview API.
type TokenReviewer struct {
	// Reviews is the primary's TokenReview client (the manager may create tokenreviews).
	Reviews authenticationclient.TokenReviewInterface
	// Namespace holds the agents' ServiceAccounts (flotilla-system).
	Namespace string
	// Audiences, when set, are the audiences a token must be bound to.
	Audiences []string
}

// Authenticate returns the cluster whose agent holds token: the API server must find the token
// valid and its user must be an agent's ServiceAccount in Namespace.
func (t TokenReviewer) Authenticate(ctx context.Context, token string) (string, error) {
	review, err := t.Reviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: t.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("reviewing the token: %w", err)
	}
	if !review.Status.Authenticated {
		if review.Status.Error != "" {
			return "", fmt.Errorf("not authenticated: %s", review.Status.Error)
		}
		return "", errors.New("not authenticated")
	}
	return AgentCluster(review.Status.User.Username, t.Namespace)
}

// AgentCluster returns the cluster whose agent a user name is: system:serviceaccount:<namespace>:
// flotilla-agent-<cluster>, with cluster a DNS-1123 label.
func AgentCluster(username, namespace string) (string, error) {
	name, ok := strings.CutPrefix(username, "system:serviceaccount:"+namespace+":"+AgentServiceAccountPrefix)
	if !ok {
		return "", fmt.Errorf("%s is no agent's ServiceAccount (%s/%s<cluster>)", username, namespace, AgentServiceAccountPrefix)
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return "", fmt.Errorf("%s names no cluster: %s", username, strings.Join(msgs, "; "))
	}
	return name, nil
}

// BootstrapSecretPrefix names the Secret of the primary's flotilla-system that a cluster's
// bootstrap credential is bound to: flotilla-agent-bootstrap-<cluster>. join makes it; the manager
// deletes it once it has given the agent a credential of its own, which ends the bootstrap one.
const BootstrapSecretPrefix = "flotilla-agent-bootstrap-"

// BootstrapSecretName is the Secret a cluster's bootstrap credential is bound to.
func BootstrapSecretName(cluster string) string { return BootstrapSecretPrefix + cluster }
