-- sweepd schema, version 2: delivery of outgoing messages. Never edit once landed.
-- An outgoing message is a `progress` event (written in the transaction of the state change
-- it reports) or a digest of routine events held back by the hourly rate limit. A delivery
-- row is one chunk of one message: planned (text fixed) before the send, confirmed after.

CREATE TABLE digests (
    id           INTEGER PRIMARY KEY,
    sweep_id     INTEGER NOT NULL REFERENCES sweeps(id),
    after_event  INTEGER NOT NULL REFERENCES events(id),
    body         TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

CREATE TABLE deliveries (
    id            INTEGER PRIMARY KEY,
    event_id      INTEGER REFERENCES events(id),
    digest_id     INTEGER REFERENCES digests(id),
    chunk         INTEGER NOT NULL,
    of            INTEGER NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('text','photo','held')),
    text          TEXT NOT NULL,
    parse_mode    TEXT,
    buttons       INTEGER NOT NULL DEFAULT 0,
    routine       INTEGER NOT NULL DEFAULT 0,
    message_id    INTEGER,
    delivered_at  REAL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    digested_into INTEGER REFERENCES digests(id),
    CHECK ((event_id IS NULL) <> (digest_id IS NULL)),
    UNIQUE (event_id, chunk),
    UNIQUE (digest_id, chunk)
);
CREATE INDEX deliveries_by_time ON deliveries(delivered_at);

CREATE TABLE daemon_state (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);

-- Messages from before this version were never queued: do not send the history on upgrade.
INSERT INTO daemon_state (key, value)
    SELECT 'outbox.after_event', CAST(coalesce(max(id), 0) AS TEXT) FROM events;
