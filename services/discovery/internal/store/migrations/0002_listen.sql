-- Notification rate limiting and persistent list_changed listeners.

-- What the rate limit of notification-triggered scans held back (see the
-- Run message): notifications coalesced into the scan, and how long it was
-- delayed after the first notification it answers.
ALTER TABLE runs
  ADD COLUMN suppressed_notifications integer NOT NULL DEFAULT 0 CHECK (suppressed_notifications >= 0),
  ADD COLUMN notification_delay_ms    bigint  NOT NULL DEFAULT 0 CHECK (notification_delay_ms >= 0);

-- The (server, audience class) pairs whose last committed scan saw a server
-- that declared `tools.listChanged`: each gets one listening connection, held
-- by whichever discovery process holds the pair's listener advisory lock.
CREATE TABLE listen_pairs (
  server_id      text        NOT NULL,
  audience_class text        NOT NULL,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (server_id, audience_class)
);
