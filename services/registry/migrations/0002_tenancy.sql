-- Tenancy (issue 8): owners bound to their tenant, and the policy of every
-- epoch kept so admission can ask for "the grants at epoch E".

-- An owner names its tenant: `<tenant>/group:<group>` or
-- `<tenant>/user:<subject>` (platform/principal.Owner, which checks it
-- strictly; this constraint is only a backstop). A bare `group:x` or `alice`
-- from before cannot be bound to a tenant by guessing, so the migration
-- refuses to run until an operator has rewritten them.
DO $$
DECLARE
  n integer;
BEGIN
  SELECT count(*) INTO n FROM servers WHERE owner !~ '^[a-z0-9][a-z0-9-]{0,62}/(group|user):.+$';
  IF n > 0 THEN
    RAISE EXCEPTION '% server owner(s) name no tenant. Owners are now <tenant>/group:<group> or <tenant>/user:<subject>; '
      'bind each to the tenant its group or subject belongs to, e.g. UPDATE registry.servers SET owner = ''tenant-a/'' || '
      'CASE WHEN owner LIKE ''group:%%'' THEN owner ELSE ''user:'' || owner END WHERE owner !~ ''^[a-z0-9-]+/(group|user):''; '
      'then start the registry again', n;
  END IF;
END $$;

ALTER TABLE servers ADD CONSTRAINT servers_owner_names_tenant
  CHECK (owner ~ '^[a-z0-9][a-z0-9-]{0,62}/(group|user):.+$');

-- history_since is the first epoch whose policy can be reconstructed from
-- grant_history and class_history: 1 for tenants created from now on, the
-- epoch at this migration for tenants that existed before it.
ALTER TABLE tenants ADD COLUMN history_since bigint NOT NULL DEFAULT 1 CHECK (history_since >= 1);
UPDATE tenants SET history_since = policy_epoch;

-- Every version of every grant, in force for the epochs
-- [from_epoch, to_epoch); to_epoch is NULL while it is the current one.
-- Written in the transaction that bumps the epoch for the change, so a
-- version is never edited once its epochs have passed, except to set
-- to_epoch once.
CREATE TABLE grant_history (
  tenant_id        text        NOT NULL REFERENCES tenants,
  subject          text        NOT NULL DEFAULT '',
  grp              text        NOT NULL DEFAULT '',
  scopes           text[]      NOT NULL,
  audience_classes text[]      NOT NULL,
  updated_at       timestamptz NOT NULL,
  from_epoch       bigint      NOT NULL CHECK (from_epoch >= 1),
  to_epoch         bigint      CHECK (to_epoch >= from_epoch),
  CHECK ((subject = '') <> (grp = ''))
);
CREATE UNIQUE INDEX grant_history_current ON grant_history (tenant_id, subject, grp) WHERE to_epoch IS NULL;
CREATE INDEX grant_history_epochs ON grant_history (tenant_id, from_epoch);

-- Every version of every audience class, as grant_history; server_ids and
-- secret_refs are parallel arrays in the class's server order.
CREATE TABLE class_history (
  name        text        NOT NULL,
  tenant_id   text        NOT NULL REFERENCES tenants,
  description text        NOT NULL,
  version     bigint      NOT NULL,
  updated_at  timestamptz NOT NULL,
  server_ids  text[]      NOT NULL,
  secret_refs text[]      NOT NULL,
  from_epoch  bigint      NOT NULL CHECK (from_epoch >= 1),
  to_epoch    bigint      CHECK (to_epoch >= from_epoch)
);
CREATE UNIQUE INDEX class_history_current ON class_history (name) WHERE to_epoch IS NULL;
CREATE INDEX class_history_epochs ON class_history (tenant_id, from_epoch);

INSERT INTO grant_history (tenant_id, subject, grp, scopes, audience_classes, updated_at, from_epoch)
SELECT g.tenant_id, g.subject, g.grp, g.scopes, g.audience_classes, g.updated_at, t.policy_epoch
FROM grants g JOIN tenants t USING (tenant_id);

INSERT INTO class_history (name, tenant_id, description, version, updated_at, server_ids, secret_refs, from_epoch)
SELECT c.name, c.tenant_id, c.description, c.version, c.updated_at,
  coalesce((SELECT array_agg(s.server_id ORDER BY s.position) FROM audience_servers s WHERE s.class_name = c.name), '{}'),
  coalesce((SELECT array_agg(s.secret_ref ORDER BY s.position) FROM audience_servers s WHERE s.class_name = c.name), '{}'),
  t.policy_epoch
FROM audience_classes c JOIN tenants t USING (tenant_id);
