package v1alpha1

// Condition types.
const (
	// ConditionReady says whether a cluster answers its probes.
	ConditionReady = "Ready"
	// ConditionRegistered says whether a cluster's registration (its context) can be used.
	ConditionRegistered = "Registered"
	// ConditionKubeconfigValid says, on the primary's ClusterDetector, whether the registration
	// Secret parses; while it does not, the last good configuration stays in force.
	ConditionKubeconfigValid = "KubeconfigValid"
)

// Condition reasons.
const (
	// ReasonProbeSucceeded: the cluster answered /readyz.
	ReasonProbeSucceeded = "ProbeSucceeded"
	// ReasonProbeFailed: the cluster did not answer /readyz in time, or answered not ready.
	ReasonProbeFailed = "ProbeFailed"
	// ReasonProbing: the cluster has not been probed yet.
	ReasonProbing = "Probing"
	// ReasonUnauthorized: the cluster refused the registered credentials.
	ReasonUnauthorized = "Unauthorized"
	// ReasonInvalidContext: the context names a missing cluster or user entry, or bad credentials data.
	ReasonInvalidContext = "InvalidContext"
	// ReasonDuplicateCluster: another context already registers the same cluster (same kube-system UID).
	ReasonDuplicateCluster = "DuplicateCluster"
	// ReasonRegistered: the context is in use.
	ReasonRegistered = "Registered"
	// ReasonPrimary: the context is the primary's own.
	ReasonPrimary = "PrimaryCluster"
	// ReasonKubeconfigParsed: the registration Secret parsed.
	ReasonKubeconfigParsed = "Parsed"
	// ReasonKubeconfigUnparsable: the registration Secret does not parse; the last good one is used.
	ReasonKubeconfigUnparsable = "Unparsable"
)
