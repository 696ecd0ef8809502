-- The rollout guard (issue 15 point 4): unauthorized events reported by
-- other services, and the guard's automatic pointer moves with their
-- evidence. Depends only on 0001 (pointers); a gap before it is fine, the
-- runner applies every migration not yet recorded, in version order.

-- One row per automatic move. A pair is held (the guard does nothing more
-- for it) while any of its actions has resumed_at NULL.
CREATE TABLE guard_actions (
  action_id           bigserial   PRIMARY KEY,
  server_id           text        NOT NULL,
  audience_class      text        NOT NULL,
  rule                smallint    NOT NULL,          -- discoveryv1.GuardRule
  move                smallint    NOT NULL,          -- catalogv1.PointerMove: ROLLBACK or CLOSE
  from_generation     bigint      NOT NULL,
  to_generation       bigint      NOT NULL,
  previous_generation bigint      NOT NULL DEFAULT 0,
  checks              bigint      NOT NULL DEFAULT 0,
  missing             bigint      NOT NULL DEFAULT 0,
  threshold           double precision NOT NULL DEFAULT 0,
  window_start        timestamptz,
  missing_tools       text[]      NOT NULL DEFAULT '{}',
  receipt_id          uuid        NOT NULL,
  decided_at          timestamptz NOT NULL,
  resumed_at          timestamptz,
  resumed_by          text        NOT NULL DEFAULT '',
  resume_reason       text        NOT NULL DEFAULT ''
);

CREATE INDEX guard_actions_pair ON guard_actions (server_id, audience_class, action_id);
CREATE UNIQUE INDEX guard_actions_one_hold ON guard_actions (server_id, audience_class) WHERE resumed_at IS NULL;

-- Unauthorized events, once per event id. action_id is the action that
-- consumed the incident (acted on it, or held the pair when it came).
CREATE TABLE guard_incidents (
  event_id       text        PRIMARY KEY,
  kind           smallint    NOT NULL,                -- discoveryv1.IncidentKind
  server_id      text        NOT NULL,
  audience_class text        NOT NULL,
  generation     bigint      NOT NULL DEFAULT 0,
  tenant_id      text        NOT NULL DEFAULT '',
  observed_at    timestamptz NOT NULL,
  detail         text        NOT NULL DEFAULT '',
  reported_by    text        NOT NULL,
  reported_at    timestamptz NOT NULL DEFAULT now(),
  action_id      bigint      REFERENCES guard_actions
);

CREATE INDEX guard_incidents_pending ON guard_incidents (server_id, audience_class) WHERE action_id IS NULL;
