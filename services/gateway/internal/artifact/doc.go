// Package artifact is the gateway's artifact store (DESIGN §7b, §8): tool
// results over the result budget, in Postgres, owned by the exact
// principal (tenant and subject, an [Owner]) whose call produced them.
// Every read, listing and deletion is scoped to an owner: an artifact of
// another principal — another user of the same tenant included — is not
// found, indistinguishable from one that never existed. Each tenant's
// unexpired artifacts are bounded by a [Quota] checked in the insert's
// transaction ([Store.Put] refuses with a [*QuotaError]). Artifacts expire
// after the retention; [Store.Sweep] deletes expired ones and
// [Store.Delete] deletes one on its owner's request.
package artifact
