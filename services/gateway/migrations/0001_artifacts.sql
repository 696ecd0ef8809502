-- The gateway's artifact store (DESIGN §7b): tool results over the result
-- budget, kept out of the model's context. An artifact belongs to the tenant
-- of the principal whose call produced it; only that tenant reads it. It is
-- deleted when it expires (retention) or when its owner deletes it.

CREATE TABLE artifacts (
  artifact_id  uuid        PRIMARY KEY,
  tenant_id    text        NOT NULL CHECK (tenant_id <> ''),
  subject      text        NOT NULL CHECK (subject <> ''),
  tool_id      text        NOT NULL CHECK (tool_id <> ''),
  receipt_id   text        NOT NULL DEFAULT '',
  mime_type    text        NOT NULL CHECK (mime_type <> ''),
  size_bytes   bigint      NOT NULL CHECK (size_bytes >= 0),
  sha256       text        NOT NULL CHECK (sha256 LIKE 'sha256:%'),
  body         bytea       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL CHECK (expires_at > created_at)
);

CREATE INDEX artifacts_tenant ON artifacts (tenant_id, created_at DESC);
CREATE INDEX artifacts_expiry ON artifacts (expires_at);
