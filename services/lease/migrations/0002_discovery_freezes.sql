-- Automatic freezes (I10): a discovery ROLLBACK or CLOSE pointer move seen
-- on DiscoveryService.Watch freezes issuance for its server. The one row
-- keeps the revision of the newest move acted on, so a replayed stream
-- (after a restart or a re-list) never freezes again a server an operator
-- resumed, and `since` keeps moves from before this service existed from
-- freezing anything. Replicas take the row lock; the first one acts.
CREATE TABLE discovery_freeze_cursor (
  id       boolean     PRIMARY KEY DEFAULT true CHECK (id),
  revision bigint      NOT NULL DEFAULT 0 CHECK (revision >= 0),
  since    timestamptz NOT NULL DEFAULT now()
);

INSERT INTO discovery_freeze_cursor DEFAULT VALUES;
