// Package election is the admission decision for a pod in the primary, pure: whether it asks to be
// elected (Elected), whether its delegate may run as written in its namespace's Pod Security level
// (Admit), and the proxy it becomes (Mutate): where it may go (pkg/placement), its constraints
// kept for its delegate, the tolerations a proxy needs, host networking stripped, the proxy label
// and the delegate finalizer; and the refusal of what only Flotilla sets on a proxy. The webhook
// gathers the input and answers with it; FuzzAdmitAndDelegate drives it with arbitrary pods.
package election
