-- Artifacts belong to the exact principal (tenant and subject) whose call
-- made them, not to its tenant: they are read, listed and deleted by owner.
-- Each tenant's unexpired artifacts are bounded by a quota (bytes and
-- count) checked in the insert's transaction, serialized per tenant by a
-- row lock on artifact_tenants so that concurrent calls on any number of
-- gateway replicas cannot both pass the check.

DROP INDEX artifacts_tenant;

CREATE INDEX artifacts_owner ON artifacts (tenant_id, subject, created_at DESC);

-- The quota sum reads only this index.
CREATE INDEX artifacts_tenant_usage ON artifacts (tenant_id, expires_at) INCLUDE (size_bytes);

-- One row per tenant that ever stored an artifact: the lock that
-- serializes its quota checks (never read for anything else).
CREATE TABLE artifact_tenants (
  tenant_id text PRIMARY KEY CHECK (tenant_id <> '')
);
