// Package quota admits the elected pods of namespaces with FleetQuotas. The webhook holds each
// one behind the flotilla.dev/quota scheduling gate, annotated waiting; this controller, on the
// leader alone and one namespace at a time, counts what the pods past the gate request (from the
// cache, plus the admissions the cache has not shown yet), lets through, oldest first, those the
// quotas have room for (placement.AdmitToQuotas), and says on the others why they wait. It writes
// each quota's usage to its status. Usage is always recomputed from the pods themselves, so a
// new leader or a restarted manager starts from the truth.
package quota
