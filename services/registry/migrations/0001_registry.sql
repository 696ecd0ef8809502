-- The registry's records (DESIGN §2, §5): MCP servers, tenants with their
-- policy epochs, audience classes, grants, tools with their contracts,
-- approvals and history, and what discovery last committed for each
-- (server, audience class). The Watch log lives in the changelog set.

CREATE TABLE servers (
  server_id        text        PRIMARY KEY CHECK (server_id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  display_name     text        NOT NULL DEFAULT '',
  description      text        NOT NULL DEFAULT '',
  owner            text        NOT NULL CHECK (owner <> ''),
  transport        text        NOT NULL CHECK (transport IN ('streamable_http', 'stdio')),
  url              text        NOT NULL DEFAULT '',
  command          text        NOT NULL DEFAULT '',
  args             text[]      NOT NULL DEFAULT '{}',
  trust_level      integer     NOT NULL,
  revision_source  integer     NOT NULL,
  identity_pin     text        NOT NULL DEFAULT '',
  scan_interval_us bigint      NOT NULL DEFAULT 0 CHECK (scan_interval_us >= 0),
  version          bigint      NOT NULL DEFAULT 1,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);

-- policy_epoch only grows: every change that can alter an admission
-- decision for the tenant bumps it in the transaction that makes it.
CREATE TABLE tenants (
  tenant_id    text        PRIMARY KEY CHECK (tenant_id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  display_name text        NOT NULL DEFAULT '',
  policy_epoch bigint      NOT NULL DEFAULT 1 CHECK (policy_epoch >= 1),
  created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audience_classes (
  name        text        PRIMARY KEY,
  tenant_id   text        NOT NULL REFERENCES tenants,
  description text        NOT NULL DEFAULT '',
  version     bigint      NOT NULL DEFAULT 1,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  CHECK (name LIKE tenant_id || '.%')
);

-- secret_ref is a reference (`env:NAME`, `file:/path`), never a credential.
CREATE TABLE audience_servers (
  class_name text    NOT NULL REFERENCES audience_classes ON DELETE CASCADE,
  server_id  text    NOT NULL REFERENCES servers,
  secret_ref text    NOT NULL DEFAULT '',
  position   integer NOT NULL,
  PRIMARY KEY (class_name, server_id)
);
CREATE INDEX audience_servers_server ON audience_servers (server_id);

-- One row per (tenant, subject) or (tenant, group); exactly one is set.
CREATE TABLE grants (
  tenant_id        text        NOT NULL REFERENCES tenants,
  subject          text        NOT NULL DEFAULT '',
  grp              text        NOT NULL DEFAULT '',
  scopes           text[]      NOT NULL DEFAULT '{}',
  audience_classes text[]      NOT NULL DEFAULT '{}',
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, subject, grp),
  CHECK ((subject = '') <> (grp = ''))
);

-- A tool exists once discovery committed a descriptor for it. contract is
-- the contract.Doc JSON (NULL while none is published); approval_digest and
-- review_state are derived from descriptor_digest, contract and the
-- approvals in force, and rewritten whenever one of them changes.
CREATE TABLE tools (
  tool_id                 text        PRIMARY KEY,
  server_id               text        NOT NULL REFERENCES servers,
  name                    text        NOT NULL,
  review_state            smallint    NOT NULL,
  enabled                 boolean     NOT NULL DEFAULT false,
  disabled_reason         text        NOT NULL DEFAULT '',
  descriptor_digest       text        NOT NULL,
  descriptor_raw          bytea       NOT NULL,
  present_at_source       boolean     NOT NULL DEFAULT true,
  contract                jsonb,
  contract_version        bigint      NOT NULL DEFAULT 0,
  latest_contract_version bigint      NOT NULL DEFAULT 0,
  approval_digest         text        NOT NULL DEFAULT '',
  version                 bigint      NOT NULL DEFAULT 1,
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now(),
  UNIQUE (server_id, name),
  CHECK (tool_id = server_id || '.' || name)
);
CREATE INDEX tools_review_state ON tools (review_state, tool_id);

-- Approvals; withdrawn ones (by a rollback) stay for the record.
CREATE TABLE approvals (
  approval_id       bigserial   PRIMARY KEY,
  tool_id           text        NOT NULL REFERENCES tools,
  approval_digest   text        NOT NULL,
  descriptor_digest text        NOT NULL,
  contract          jsonb       NOT NULL,
  contract_version  bigint      NOT NULL,
  approved_by       text        NOT NULL,
  approved_at       timestamptz NOT NULL DEFAULT now(),
  comment           text        NOT NULL DEFAULT '',
  withdrawn_at      timestamptz,
  withdrawn_by      text
);
CREATE UNIQUE INDEX approvals_in_force ON approvals (tool_id, approval_digest) WHERE withdrawn_at IS NULL;

-- History of every tool; revision is the change-log revision of the change.
CREATE TABLE tool_events (
  event_id          bigserial   PRIMARY KEY,
  tool_id           text        NOT NULL REFERENCES tools,
  revision          bigint      NOT NULL,
  kind              text        NOT NULL,
  actor             text        NOT NULL,
  at                timestamptz NOT NULL DEFAULT now(),
  descriptor_digest text        NOT NULL DEFAULT '',
  contract_version  bigint      NOT NULL DEFAULT 0,
  approval_digest   text        NOT NULL DEFAULT '',
  detail            text        NOT NULL DEFAULT '',
  contract          jsonb
);
CREATE INDEX tool_events_tool ON tool_events (tool_id, event_id);

-- Where the registry is in discovery's Watch stream.
CREATE TABLE discovery_cursor (
  singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
  revision   bigint      NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO discovery_cursor DEFAULT VALUES;

-- The last pointer move applied per (server, audience class), and the tools
-- of its snapshot. A tool's descriptor is the one listed by the most recently
-- moved pointer that lists it (highest discovery_revision).
CREATE TABLE source_pointers (
  server_id          text        NOT NULL REFERENCES servers,
  audience_class     text        NOT NULL,
  generation         bigint      NOT NULL,
  state              smallint    NOT NULL,
  discovery_revision bigint      NOT NULL,
  snapshot_digest    text        NOT NULL DEFAULT '',
  applied_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (server_id, audience_class)
);

CREATE TABLE source_tools (
  server_id          text   NOT NULL,
  audience_class     text   NOT NULL,
  name               text   NOT NULL,
  descriptor_digest  text   NOT NULL,
  descriptor_raw     bytea  NOT NULL,
  discovery_revision bigint NOT NULL,
  PRIMARY KEY (server_id, audience_class, name),
  FOREIGN KEY (server_id, audience_class) REFERENCES source_pointers ON DELETE CASCADE
);
CREATE INDEX source_tools_tool ON source_tools (server_id, name, discovery_revision DESC);
