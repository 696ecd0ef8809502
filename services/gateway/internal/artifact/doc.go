// Package artifact is the gateway's artifact store (DESIGN §7b): tool
// results over the result budget, in Postgres, owned by the tenant of the
// principal whose call produced them. Every read is scoped to a tenant: an
// artifact of another tenant is not found, indistinguishable from one that
// never existed. Artifacts expire after the retention; [Store.Sweep]
// deletes expired ones and [Store.Delete] deletes one on its owner's
// request.
package artifact
