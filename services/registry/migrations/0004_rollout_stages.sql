-- Rollout stages (issue 15): how far one server's tools are rolled out to
-- one audience class, SHADOW (1) → CANARY (2) → FULL (3), set by an
-- operator with a reason. Part of the class's tenant's policy: every
-- change bumps the tenant's epoch in the same transaction.
--
-- Existing classes keep today's behaviour: this migration inserts no row,
-- and a (server, class) pair without a row is FULL (every run, every
-- effect class). The registry reports such a pair as FULL at version 0.
CREATE TABLE rollout_stages (
  audience_class text        NOT NULL REFERENCES audience_classes,
  server_id      text        NOT NULL REFERENCES servers,
  tenant_id      text        NOT NULL REFERENCES tenants,
  stage          smallint    NOT NULL CHECK (stage IN (1, 2, 3)),
  -- For CANARY: the share of runs admitted in percent, and the effect
  -- classes admitted (catalog.v1.EffectClass numbers, sorted).
  canary_percent smallint    NOT NULL DEFAULT 0 CHECK (canary_percent BETWEEN 0 AND 100),
  canary_effects smallint[]  NOT NULL DEFAULT '{}',
  reason         text        NOT NULL CHECK (reason <> ''),
  changed_by     text        NOT NULL,
  version        bigint      NOT NULL CHECK (version >= 1),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  -- The tenant epoch the stage took effect at, and the log revision of the
  -- change.
  policy_epoch   bigint      NOT NULL,
  revision       bigint      NOT NULL DEFAULT 0,
  PRIMARY KEY (audience_class, server_id),
  CHECK (audience_class LIKE tenant_id || '.%'),
  CHECK (stage = 2 OR (canary_percent = 0 AND canary_effects = '{}'))
);
CREATE INDEX rollout_stages_server ON rollout_stages (server_id);
CREATE INDEX rollout_stages_tenant ON rollout_stages (tenant_id);

-- Every stage every pair was set to, in force for the epochs
-- [from_epoch, to_epoch) as grant_history and class_history: GetPolicy at
-- a past epoch reads it, and `toolcrib rollout history` shows it. It
-- outlives the server (DeleteServer ends its open entries), so a policy
-- at a passed epoch never changes.
CREATE TABLE rollout_stage_history (
  audience_class text        NOT NULL,
  server_id      text        NOT NULL,
  tenant_id      text        NOT NULL REFERENCES tenants,
  stage          smallint    NOT NULL CHECK (stage IN (1, 2, 3)),
  canary_percent smallint    NOT NULL,
  canary_effects smallint[]  NOT NULL,
  reason         text        NOT NULL,
  changed_by     text        NOT NULL,
  version        bigint      NOT NULL,
  updated_at     timestamptz NOT NULL,
  policy_epoch   bigint      NOT NULL,
  revision       bigint      NOT NULL DEFAULT 0,
  from_epoch     bigint      NOT NULL CHECK (from_epoch >= 1),
  to_epoch       bigint      CHECK (to_epoch >= from_epoch)
);
CREATE UNIQUE INDEX rollout_stage_history_current ON rollout_stage_history (audience_class, server_id) WHERE to_epoch IS NULL;
CREATE INDEX rollout_stage_history_epochs ON rollout_stage_history (tenant_id, from_epoch);
CREATE INDEX rollout_stage_history_pair ON rollout_stage_history (audience_class, server_id, from_epoch);
