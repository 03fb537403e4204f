package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Condition types.
const (
	// ConditionReady says whether a cluster answers its probes.
	ConditionReady = "Ready"
	// ConditionRegistered says whether a cluster's registration (its context) can be used.
	ConditionRegistered = "Registered"
	// ConditionKubeconfigValid says, on the primary's ClusterDetector, whether the registration
	// Secret parses; while it does not, the last good configuration stays in force.
	ConditionKubeconfigValid = "KubeconfigValid"
	// ConditionReplacement says, on a secondary's ClusterDetector, that `flotillactl cluster
	// replace` is replacing it, and at which step (its reason): Checking, Replicating, Draining,
	// Detaching, Removing. It mirrors AnnotationReplacement, which the command writes.
	ConditionReplacement = "Replacement"
	// ConditionSynced says, on a Replicator, whether everything it applies is applied in every
	// cluster it targets.
	ConditionSynced = "Synced"
	// ConditionResolved says, on a ClusterSet, whether its selector parses and every cluster it
	// names is a registered secondary.
	ConditionResolved = "Resolved"
	// ConditionExhausted says, on a FleetQuota, whether a resource is at its limit (overall or
	// in a cluster): the next pod that asks for it waits.
	ConditionExhausted = "Exhausted"
	// PodConditionDelegated says, on a proxy, that its delegate was created in its secondary.
	PodConditionDelegated corev1.PodConditionType = "flotilla.dev/Delegated"
)

// Condition reasons.
const (
	// ReasonProbeSucceeded: the cluster answered /readyz.
	ReasonProbeSucceeded = "ProbeSucceeded"
	// ReasonAgentCredentialRotated: the manager gave a pulled cluster's agent a new credential.
	ReasonAgentCredentialRotated = "AgentCredentialRotated"
	// ReasonAgentCredentialFailed: giving a pulled cluster's agent a new credential failed.
	ReasonAgentCredentialFailed = "AgentCredentialFailed"
	// ReasonProbeFailed: the cluster did not answer /readyz in time, or answered not ready.
	ReasonProbeFailed = "ProbeFailed"
	// ReasonProbing: the cluster has not been probed yet.
	ReasonProbing = "Probing"
	// ReasonUnauthorized: the cluster refused the registered credentials.
	ReasonUnauthorized = "Unauthorized"
	// ReasonTokenExpired: the registered token expired before it could be renewed (the cluster did
	// not answer for longer than the rest of its life); joining the cluster again mints a new one.
	ReasonTokenExpired = "TokenExpired"
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
	// ReasonNotRegistered: the cluster's context is no longer in the registration Secret, and it
	// was not removed with `flotillactl cluster remove`: nothing of it is deleted, its virtual node
	// is cordoned and NotReady until the context is back or the cluster is removed.
	ReasonNotRegistered = "NotRegistered"
	// ReasonOwnerMissing: the FlotillaPrimary object could not be ensured in the secondary.
	ReasonOwnerMissing = "FlotillaPrimaryMissing"
)

// Reasons of a virtual node's Ready condition.
const (
	// ReasonSecondaryRunning: the secondary answers its probes. (Also on a proxy: SecondaryUnavailable.)
	ReasonSecondaryRunning = "SecondaryRunning"
	// ReasonSecondaryUnavailable: the secondary does not answer, or is not usable (a virtual node's
	// Ready=False, or a proxy Pending until it is).
	ReasonSecondaryUnavailable = "SecondaryUnavailable"
)

// Reasons of a proxy's status (Pending, Failed) and of the Events on it.
const (
	// ReasonWaitingForDependencies: a ConfigMap, Secret, ServiceAccount, the namespace or the
	// FlotillaPrimary is not there yet, in the primary or the secondary.
	ReasonWaitingForDependencies = "WaitingForDependencies"
	// ReasonPreviousIncarnationTerminating: the delegate of an earlier pod of the same name is going.
	ReasonPreviousIncarnationTerminating = "PreviousIncarnationTerminating"
	// ReasonNamespaceNotManaged: the namespace exists in the secondary without this primary's
	// flotilla.dev/managed-by label (also a Replicator's Synced reason).
	ReasonNamespaceNotManaged = "NamespaceNotManaged"
	// ReasonServiceAccountNotManaged: the delegate names a ServiceAccount of the secondary that
	// Flotilla did not create, in a namespace that does not allow it.
	ReasonServiceAccountNotManaged = "ServiceAccountNotManaged"
	// ReasonKubeletCertificateSelfSigned (Event on a virtual node): its kubelet API serves a
	// self-signed certificate, the cluster's CSR API having given none (no signer configured).
	ReasonKubeletCertificateSelfSigned = "KubeletCertificateSelfSigned"
	// ReasonKubeletCertificateIssued (Event on a virtual node): its kubelet API serves a
	// certificate of the cluster's CSR API again, after a self-signed one.
	ReasonKubeletCertificateIssued = "KubeletCertificateIssued"
	// ReasonVirtualNodeServingCertificate: the reason of the manager's approval of its own
	// kubelet serving CSR for a virtual node.
	ReasonVirtualNodeServingCertificate = "FlotillaVirtualNodeServingCertificate"
	// ReasonNameConflict: a pod (or a claim the pod names) of that namespace and name exists in
	// the secondary and is not this primary's; it is left alone and the proxy waits.
	ReasonNameConflict = "NameConflict"
	// ReasonWaitingForClaim: a claim the pod names is not yet this primary's real claim of it in
	// the secondary (or is missing in the primary, or is not of class flotilla): the delegate,
	// which would mount whatever claim of that name the secondary has, waits.
	ReasonWaitingForClaim = "WaitingForClaim"
	// ReasonPlaced: a proxy no cluster could take at admission fits one now and may go there.
	ReasonPlaced = "Placed"
	// ReasonGangPlaced (an Event on each member): a gang's members are all there and one cluster
	// fits every one of them: they go there together.
	ReasonGangPlaced = "GangPlaced"
	// ReasonGangWaiting (an Event on a member): its gang waits, for its other members or for a
	// cluster that fits them all.
	ReasonGangWaiting = "GangWaiting"
	// ReasonNotAdmitted: the proxy was not made, or was changed after, Flotilla's webhook (no
	// valid admission seal), or asks for what the webhook refuses: it gets no delegate (Failed).
	ReasonNotAdmitted = "NotAdmitted"
	// ReasonDelegateRejected: the secondary refused the delegate for good (the proxy Failed).
	ReasonDelegateRejected = "DelegateRejected"
	// ReasonDelegateCreated: the delegate was created (the Delegated condition, an Event).
	ReasonDelegateCreated = "DelegateCreated"
	// ReasonDevicesAllocated (an Event on the proxy): the secondary's scheduler allocated the
	// devices of the delegate's claims (DRA): which devices, on which node.
	ReasonDevicesAllocated = "DevicesAllocated"
	// ReasonDelegateLost: the delegate vanished while its proxy lived.
	ReasonDelegateLost = "DelegateLost"
	// ReasonNotElected (a pod's status reason and an Event): a pod that is not a proxy is bound to
	// a virtual node, where nothing runs it.
	ReasonNotElected = "NotElected"
	// ReasonVolumeClusterLost: the cluster that holds a claim's data is unreachable and its pod
	// chose to start on a fresh claim elsewhere (flotilla.dev/on-volume-cluster-loss: recreate).
	ReasonVolumeClusterLost = "VolumeClusterLost"
	// ReasonRebalanced (an Event): a pod was evicted so that its controller's pods return to a
	// secondary back from a failover (--rebalance-on-return).
	ReasonRebalanced = "Rebalanced"
	// ReasonClusterRemoved: a terminating proxy was released because its virtual node is gone.
	ReasonClusterRemoved = "ClusterRemoved"
	// ReasonClusterFenced: released because its virtual node is fenced out-of-service.
	ReasonClusterFenced = "ClusterFenced"
	// ReasonClusterUnreachable: an at-least-once proxy released after failover and its grace period.
	ReasonClusterUnreachable = "ClusterUnreachable"
)

// Reasons of a Replicator's Synced and Ready conditions and Events.
const (
	// ReasonSynced: applied everywhere.
	ReasonSynced = "Synced"
	// ReasonApplyFailed: a cluster refused or did not answer in time.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonKindMissing: a cluster does not serve a kind of the resources (its CRD is not
	// installed there, and replicateCRDs is off or its admin did not allow it).
	ReasonKindMissing = "KindMissing"
	// ReasonKindNotAllowed: a cluster's admin has not allowed the joined identity to write a kind
	// of the resources (flotillactl cluster join --kinds), or the manager may not write it in the
	// primary (the chart's replicator.kinds).
	ReasonKindNotAllowed = "KindNotAllowed"
	// ReasonUnknownTargets: targetCluster names a cluster that is not registered, or is ambiguous.
	ReasonUnknownTargets = "UnknownTargets"
	// ReasonTargetDenied: targetCluster names a cluster the Replicator's namespace, or its
	// replication namespace, may not use (their ClusterSetBindings).
	ReasonTargetDenied = "TargetDenied"
	// ReasonResolved: a ClusterSet's members are known.
	ReasonResolved = "Resolved"
	// ReasonSelectorInvalid: a ClusterSet's selector does not parse; it selects no cluster.
	ReasonSelectorInvalid = "SelectorInvalid"
	// ReasonUnknownClusters: a ClusterSet names a cluster that is not a registered secondary.
	ReasonUnknownClusters = "UnknownClusters"
	// ReasonNamespaceNotEnabled: placement Elect in a namespace without flotilla.dev/enabled=true.
	ReasonNamespaceNotEnabled = "NamespaceNotEnabled"
	// ReasonReplicasReady: the Deployment's replicas are ready in every cluster.
	ReasonReplicasReady = "ReplicasReady"
	// ReasonReplicasNotReady: some are not (yet).
	ReasonReplicasNotReady = "ReplicasNotReady"
	// ReasonNoDeployment: the Replicator has no Deployment, so Ready follows Synced.
	ReasonNoDeployment = "NoDeployment"
	// ReasonCleanupPending: a cluster no longer targeted, or being deleted, still holds objects.
	ReasonCleanupPending = "CleanupPending"
	// ReasonNamespaceKept: a namespace the Replicator created is kept at its deletion, since it
	// holds something that is not the Replicator's.
	ReasonNamespaceKept = "NamespaceKept"
	// ReasonObjectNotOurs: an object the Replicator would apply exists and is not its own: it is
	// left alone (an Event says which).
	ReasonObjectNotOurs = "ObjectNotOurs"
	// ReasonTLSFailed: the TLS material could not be made.
	ReasonTLSFailed = "TLSFailed"
	// ReasonCertificatesPending: cert-manager has not issued the Certificates yet.
	ReasonCertificatesPending = "CertificatesPending"
	// ReasonNoClusterFits (an Event on a proxy): no cluster takes the pod now; it waits Pending for
	// the primary's scheduler to bind it once a virtual node has room.
	ReasonNoClusterFits = "NoClusterFits"
	// ReasonQuotaExceeded (an Event and the reason on a proxy): its namespace's FleetQuota has no
	// room for it now; it waits gated and starts when room frees.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonAllowanceExceeded (the reason on a proxy): its secondary lends this primary a limited
	// part of itself (a PrimaryAllowance there) and has no room for the delegate now; it is created
	// once the secondary's lender gives its namespace room.
	ReasonAllowanceExceeded = "AllowanceExceeded"
	// ReasonOverrideFailed (a Warning Event and the reason on a proxy or a Replicator's
	// condition): an Override rule cannot apply to what goes to a cluster (a patch path that does
	// not exist, a change the object has no place for); nothing half-changed is sent.
	ReasonOverrideFailed = "OverrideFailed"
	// ReasonQuotaAdmitted (an Event on a proxy): its FleetQuotas had room, its gate is removed.
	ReasonQuotaAdmitted = "QuotaAdmitted"
	// ReasonPriorityClassMissing: the proxy's priority class does not exist in its secondary.
	ReasonPriorityClassMissing = "PriorityClassMissing"
	// ReasonDelegateUpdated (an Event on a proxy): a change of the proxy reached its delegate.
	ReasonDelegateUpdated = "DelegateUpdated"
)

// Reasons of a Replicator's conditions and Events about whose namespaces and ServiceAccounts it uses.
const (
	// ReasonNamespaceNotAllowed: the replication namespace exists, the Replicator did not create
	// it, and it is not labelled flotilla.dev/replication-allowed=true: nothing is written there.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
)

// Reasons of a cluster pinned to its identity.
const (
	// ReasonIdentityChanged: the cluster answered with another kube-system UID than the one
	// pinned for its name (rebuilt behind the same URL, or another cluster there). It is not
	// used, and nothing of it is touched, until `flotillactl cluster join` of its context pins the
	// new identity.
	ReasonIdentityChanged = "IdentityChanged"
)

// A Replicator's health and rollout: condition types, their reasons and Events.
const (
	// ConditionHealthy says, on a Replicator, whether what it applied is healthy in every cluster at
	// its current generation (see ObjectHealth).
	ConditionHealthy = "Healthy"
	// ConditionProgressing says, on a Replicator with spec.rollout, whether its current generation
	// is on its way through the waves (True), has reached them all (True, RolledOut) or is stopped
	// at an unhealthy wave (False, RolloutBlocked).
	ConditionProgressing = "Progressing"

	// ReasonHealthy: every object judged is healthy in every cluster.
	ReasonHealthy = "Healthy"
	// ReasonUnhealthy: some object is not healthy in some cluster (the message names up to three).
	ReasonUnhealthy = "Unhealthy"
	// ReasonNotSynced: some cluster is not synced, so its health is not known.
	ReasonNotSynced = "NotSynced"
	// ReasonRolloutIncomplete: some cluster waits for its wave: it still has an older generation.
	ReasonRolloutIncomplete = "RolloutIncomplete"
	// ReasonRolledOut: every wave has the current generation.
	ReasonRolledOut = "RolledOut"
	// ReasonWaitingForWave: a wave is not healthy yet and nothing in it fails: the next waits.
	ReasonWaitingForWave = "WaitingForWave"
	// ReasonRolloutBlocked: a wave is unhealthy with a failure (an image that cannot be pulled,
	// crashing containers, a Deployment past its progress deadline): the next waves keep their
	// generation until the spec is fixed (also a Warning Event).
	ReasonRolloutBlocked = "RolloutBlocked"
	// ReasonWaveApplied (an Event): a wave got the current generation.
	ReasonWaveApplied = "WaveApplied"
)

// An Override or ClusterOverride: its condition and reasons (ReasonOverrideFailed too).
const (
	// ConditionApplied says whether the rules apply to what they match: False, with the rule,
	// object and cluster, once one could not at this generation.
	ConditionApplied = "Applied"
	// ReasonRulesValid: no object has failed the rules at this generation.
	ReasonRulesValid = "RulesValid"
)

// A PrimaryAllowance in a secondary: its condition and reasons.
const (
	// ConditionEnforced says, on a PrimaryAllowance, whether every namespace of its primary holds
	// its part in a ResourceQuota the secondary's API server enforces.
	ConditionEnforced = "Enforced"
	// ReasonQuotasInForce: every namespace's quota is written and counted by the API server.
	ReasonQuotasInForce = "QuotasInForce"
	// ReasonQuotasPending: some namespace's quota is not yet written or not yet counted (its
	// status lags its spec); the message names it.
	ReasonQuotasPending = "QuotasPending"
	// ReasonOverAllowance (also a Warning Event): the primary uses more than Hard (lowered below
	// what runs, or used before the allowance existed): nothing is evicted, nothing more admitted.
	ReasonOverAllowance = "OverAllowance"
)
