-- The change log of this schema: one row per committed change, revision
-- gapless and in commit order (see package changelog).
CREATE TABLE change_counter (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  revision  bigint  NOT NULL
);
INSERT INTO change_counter (revision) VALUES (0);

CREATE TABLE changes (
  revision     bigint      PRIMARY KEY,
  committed_at timestamptz NOT NULL DEFAULT now(),
  kind         text        NOT NULL,
  payload      bytea       NOT NULL
);
CREATE INDEX changes_committed_at ON changes (committed_at);
