-- Admission receipts (DESIGN §7): one row per Check answered, written in
-- batches off the hot path. A row binds the decision to the generation,
-- descriptor digest and policy epoch it was made from.

CREATE TABLE receipts (
  receipt_id        uuid        PRIMARY KEY,
  tenant_id         text        NOT NULL,
  subject           text        NOT NULL,
  tool_id           text        NOT NULL,
  server_id         text        NOT NULL DEFAULT '',
  audience_class    text        NOT NULL DEFAULT '',
  generation        bigint      NOT NULL CHECK (generation >= 0),
  descriptor_digest text        NOT NULL DEFAULT '',
  policy_epoch      bigint      NOT NULL CHECK (policy_epoch >= 0),
  argument_digest   text        NOT NULL DEFAULT '',
  mode              smallint    NOT NULL,
  run_id            text        NOT NULL DEFAULT '',
  decision          smallint    NOT NULL,
  reason            smallint    NOT NULL,
  effect_class      smallint    NOT NULL DEFAULT 0,
  decided_at        timestamptz NOT NULL,
  replica           text        NOT NULL,
  stored_at         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX receipts_tenant_decided ON receipts (tenant_id, decided_at);
