-- Shadow comparison (issue 15 point 2): the static tool list attached to a
-- (server, audience class), and the comparison of every proven generation
-- with it and with the previous generation, stored with the run.
-- Independent of every later migration: it only adds its own two tables.

-- One row per pair: the current version of its static tool list.
CREATE TABLE static_tool_lists (
  server_id      text        NOT NULL,
  audience_class text        NOT NULL,
  tenant_id      text        NOT NULL,
  version        bigint      NOT NULL CHECK (version >= 1),
  -- What a commit compares with: [{name, descriptor_digest?, input_schema_digest?}].
  entries        jsonb       NOT NULL,
  -- The input schemas as given, canonical JSON by tool name (only entries that have one).
  schemas        jsonb       NOT NULL DEFAULT '{}',
  set_by         text        NOT NULL,
  set_at         timestamptz NOT NULL DEFAULT now(),
  reason         text        NOT NULL DEFAULT '',
  PRIMARY KEY (server_id, audience_class)
);

-- The comparison stored with a run: written in the commit's transaction
-- (or the refresh's, for an UNCHANGED run against a changed static list).
CREATE TABLE run_comparisons (
  run_id              uuid        PRIMARY KEY REFERENCES runs ON DELETE CASCADE,
  server_id           text        NOT NULL,
  audience_class      text        NOT NULL,
  tenant_id           text        NOT NULL,
  generation          bigint      NOT NULL CHECK (generation >= 1),
  static_version      bigint      NOT NULL DEFAULT 0,   -- 0: no static list attached
  against_static      jsonb,                            -- ToolDiff (protojson); NULL when none
  previous_generation bigint      NOT NULL DEFAULT 0,   -- 0: the pair's first generation
  against_previous    jsonb,                            -- ToolDiff (protojson); NULL when none
  compared_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_comparisons_pair ON run_comparisons (server_id, audience_class, compared_at DESC);
CREATE INDEX run_comparisons_generation ON run_comparisons (server_id, audience_class, generation, compared_at DESC);
