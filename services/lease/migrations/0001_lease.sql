-- The lease service's records (DESIGN §7a): one execution receipt per lease
-- issued (written before the lease is returned), revocations, and the
-- issuance freeze of each server. Signing keys are not here: they come from
-- a key source (a key file, a KMS), never from a database column.

CREATE TABLE execution_receipts (
  receipt_id           uuid        PRIMARY KEY,
  lease_id             text        NOT NULL UNIQUE CHECK (lease_id <> ''),
  admission_receipt_id text        NOT NULL DEFAULT '',
  subject              text        NOT NULL CHECK (subject <> ''),
  tenant_id            text        NOT NULL DEFAULT '',
  tool_id              text        NOT NULL CHECK (tool_id <> ''),
  server_id            text        NOT NULL CHECK (server_id <> ''),
  audience_class       text        NOT NULL DEFAULT '',
  descriptor_digest    text        NOT NULL,
  generation           bigint      NOT NULL CHECK (generation >= 1),
  policy_epoch         bigint      NOT NULL CHECK (policy_epoch >= 0),
  argument_digest      text        NOT NULL,
  audience             text        NOT NULL CHECK (audience <> ''),
  holder_thumbprint    text        NOT NULL,
  key_id               text        NOT NULL,
  issued_at            timestamptz NOT NULL,
  expires_at           timestamptz NOT NULL CHECK (expires_at > issued_at
                                                   AND expires_at <= issued_at + interval '60 seconds'),
  created_at           timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX execution_receipts_tool ON execution_receipts (tool_id, issued_at);

-- A revocation refuses every lease of its target issued at or before
-- effective_at.
CREATE TABLE revocations (
  revocation_id bigserial   PRIMARY KEY,
  kind          text        NOT NULL CHECK (kind IN ('lease', 'tool', 'server', 'tenant')),
  target        text        NOT NULL CHECK (target <> ''),
  reason        text        NOT NULL DEFAULT '',
  revoked_by    text        NOT NULL,
  effective_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX revocations_target ON revocations (kind, target, effective_at);

-- One row per server whose issuance was ever frozen or resumed.
CREATE TABLE freezes (
  server_id  text        PRIMARY KEY CHECK (server_id <> ''),
  frozen     boolean     NOT NULL,
  reason     text        NOT NULL DEFAULT '',
  changed_by text        NOT NULL,
  changed_at timestamptz NOT NULL
);
