-- Discovery's schema: runs and their pages, immutable catalog snapshots and
-- their tools, generation lifecycle, active pointers, catalog receipts and
-- generation bindings. River's job tables live in this schema too (created
-- by rivermigrate at start-up, not here).

-- One attempt of a scan of (server_id, audience_class).
CREATE TABLE runs (
  run_id               uuid        PRIMARY KEY,
  scan_id              text        NOT NULL,            -- river job id
  attempt              integer     NOT NULL CHECK (attempt >= 1),
  server_id            text        NOT NULL,
  audience_class       text        NOT NULL,
  tenant_id            text        NOT NULL DEFAULT '',
  state                text        NOT NULL CHECK (state IN
    ('DISCOVERING','VALIDATING','SNAPSHOT_PROVEN','ELIGIBLE','UNVERSIONED_OBSERVATION','INCOMPLETE','QUARANTINED','RETIRED')),
  reason               text        NOT NULL DEFAULT '',  -- RunReason name without prefix; '' for none
  detail               text        NOT NULL DEFAULT '',
  trigger              text        NOT NULL,
  worker               text        NOT NULL,
  started_at           timestamptz NOT NULL DEFAULT now(),
  finished_at          timestamptz,
  protocol_version     text        NOT NULL DEFAULT '',
  source_revision      text        NOT NULL DEFAULT '',
  closing_revision     text        NOT NULL DEFAULT '',
  page_root            text        NOT NULL DEFAULT '',
  page_count           integer     NOT NULL DEFAULT 0,
  tool_count           integer     NOT NULL DEFAULT 0,
  bytes                bigint      NOT NULL DEFAULT 0,
  policy_epoch         bigint      NOT NULL DEFAULT 0,
  generation           bigint      NOT NULL DEFAULT 0,
  confirmed_generation bigint      NOT NULL DEFAULT 0,
  identity_digest      text        NOT NULL DEFAULT '',
  trust_config_digest  text        NOT NULL DEFAULT '',
  cache_scope          text        NOT NULL DEFAULT '',
  flags                jsonb       NOT NULL DEFAULT '[]'
);
CREATE INDEX runs_pointer ON runs (server_id, audience_class, started_at DESC);
CREATE INDEX runs_started ON runs (started_at DESC, run_id DESC);
CREATE INDEX runs_scan ON runs (scan_id);
CREATE INDEX runs_open ON runs (server_id, audience_class) WHERE finished_at IS NULL;

-- What each tools/list call of a run returned.
CREATE TABLE run_pages (
  run_id      uuid        NOT NULL REFERENCES runs ON DELETE CASCADE,
  idx         integer     NOT NULL,
  cursor_in   text        NOT NULL,
  cursor_out  text        NOT NULL,
  has_next    boolean     NOT NULL,
  revision    text        NOT NULL,
  tool_count  integer     NOT NULL,
  page_digest text        NOT NULL,
  bytes       bigint      NOT NULL,
  received_at timestamptz NOT NULL,
  PRIMARY KEY (run_id, idx)
);

-- The active pointer of (server_id, audience_class): the one acceptance
-- point (I1). generation is the active one (the last active one when
-- CLOSED); last_generation only grows and numbers the next commit.
CREATE TABLE pointers (
  server_id       text        NOT NULL,
  audience_class  text        NOT NULL,
  tenant_id       text        NOT NULL,
  generation      bigint      NOT NULL CHECK (generation >= 1),
  last_generation bigint      NOT NULL CHECK (last_generation >= generation),
  state           text        NOT NULL CHECK (state IN ('ACTIVE','CLOSED')),
  moved_at        timestamptz NOT NULL,
  fresh_until     timestamptz NOT NULL,
  revision        bigint      NOT NULL,  -- change log revision of the last move
  PRIMARY KEY (server_id, audience_class)
);

-- toolCatalogSnapshot.v1 headers; immutable once written.
CREATE TABLE snapshots (
  server_id            text        NOT NULL,
  audience_class       text        NOT NULL,
  generation           bigint      NOT NULL,
  tenant_id            text        NOT NULL,
  run_id               uuid        NOT NULL,
  state                text        NOT NULL CHECK (state IN ('ELIGIBLE','UNVERSIONED_OBSERVATION')),
  identity_digest      text        NOT NULL,
  endpoint_digest      text        NOT NULL,
  protocol_version     text        NOT NULL,
  discovery_started_at timestamptz NOT NULL,
  expires_at           timestamptz NOT NULL,
  policy_epoch         bigint      NOT NULL,
  source_revision      text        NOT NULL,
  page_root            text        NOT NULL,
  page_digests         text[]      NOT NULL,
  cache_scope          text        NOT NULL,
  trust_config_digest  text        NOT NULL,
  snapshot_digest      text        NOT NULL,
  tool_count           integer     NOT NULL,
  committed_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (server_id, audience_class, generation)
);

-- The tools of a snapshot, raw JSON verbatim; immutable once written.
CREATE TABLE snapshot_tools (
  server_id            text    NOT NULL,
  audience_class       text    NOT NULL,
  generation           bigint  NOT NULL,
  ordinal              integer NOT NULL,
  name                 text    NOT NULL,
  tool_id              text    NOT NULL,
  descriptor_digest    text    NOT NULL,
  input_schema_digest  text    NOT NULL,
  output_schema_digest text    NOT NULL,
  schema_dialect       text    NOT NULL,
  flags                text[]  NOT NULL,
  raw                  bytea   NOT NULL,
  PRIMARY KEY (server_id, audience_class, generation, ordinal),
  FOREIGN KEY (server_id, audience_class, generation) REFERENCES snapshots ON DELETE CASCADE
);

-- The mutable lifecycle of a generation: freshness (extended by rescans
-- that prove the same catalog) and retirement.
CREATE TABLE generations (
  server_id      text        NOT NULL,
  audience_class text        NOT NULL,
  generation     bigint      NOT NULL,
  fresh_until    timestamptz NOT NULL,
  retired_at     timestamptz,
  PRIMARY KEY (server_id, audience_class, generation),
  FOREIGN KEY (server_id, audience_class, generation) REFERENCES snapshots ON DELETE CASCADE
);

-- One row per accepted pointer move, written in the move's transaction.
CREATE TABLE receipts (
  receipt_id          uuid        PRIMARY KEY,
  server_id           text        NOT NULL,
  audience_class      text        NOT NULL,
  generation          bigint      NOT NULL,
  previous_generation bigint      NOT NULL,
  source_revision     text        NOT NULL,
  page_root           text        NOT NULL,
  snapshot_digest     text        NOT NULL,
  policy_epoch        bigint      NOT NULL,
  accepted_at         timestamptz NOT NULL DEFAULT now(),
  run_id              text        NOT NULL,
  move                text        NOT NULL CHECK (move IN ('ACTIVATE','ROLLBACK','CLOSE','REFRESH')),
  reason              text        NOT NULL DEFAULT '',
  revision            bigint      NOT NULL
);
CREATE INDEX receipts_pointer ON receipts (server_id, audience_class, accepted_at DESC);

-- Live agent runs bound to a generation (I11): filled by BindGeneration.
CREATE TABLE bindings (
  server_id      text        NOT NULL,
  audience_class text        NOT NULL,
  generation     bigint      NOT NULL,
  run_id         text        NOT NULL,
  bound_until    timestamptz NOT NULL,
  PRIMARY KEY (server_id, audience_class, generation, run_id)
);

-- Snapshots and their tools are immutable: no UPDATE ever, no TRUNCATE, and
-- DELETE only by the retention sweep (which sets toolcrib.retention = 'on'
-- for its transaction) and never of the generation a pointer names.
CREATE FUNCTION refuse_snapshot_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF coalesce(current_setting('toolcrib.retention', true), '') <> 'on' THEN
      RAISE EXCEPTION 'catalog snapshots are immutable: % % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM pointers p WHERE p.server_id = OLD.server_id
               AND p.audience_class = OLD.audience_class AND p.generation = OLD.generation) THEN
      RAISE EXCEPTION 'generation % of (%, %) is the pointer''s generation; it is never deleted',
        OLD.generation, OLD.server_id, OLD.audience_class USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'catalog snapshots are immutable: % % refused', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER snapshots_immutable BEFORE UPDATE OR DELETE ON snapshots
  FOR EACH ROW EXECUTE FUNCTION refuse_snapshot_change();
CREATE TRIGGER snapshot_tools_immutable BEFORE UPDATE OR DELETE ON snapshot_tools
  FOR EACH ROW EXECUTE FUNCTION refuse_snapshot_change();
CREATE TRIGGER snapshots_no_truncate BEFORE TRUNCATE ON snapshots
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_snapshot_change();
CREATE TRIGGER snapshot_tools_no_truncate BEFORE TRUNCATE ON snapshot_tools
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_snapshot_change();
