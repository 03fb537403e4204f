// Package agentcredential keeps the credential of each pulled secondary's agent alive and its
// own: once the agent holds a session, the leader mints a token of the primary's ServiceAccount
// flotilla-system/flotilla-agent-<cluster> and writes it, through that session, into the
// secondary's Secret flotilla-system/flotilla-agent (the agent reads it at its next connection);
// it does so again past a fraction of the token's life. The join's bootstrap credential is bound
// to a Secret of the primary, deleted once the first such token is written, which ends it. The
// decision is a pure function of the credential the agent last proved itself with and the one
// last written.
package agentcredential
