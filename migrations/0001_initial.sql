-- sweepd schema, version 1. Never edit once landed: add a new numbered file.
-- State CHECK lists must match sweepd/states.py (tests/test_migrations.py checks).

CREATE TABLE sweeps (
    id            INTEGER PRIMARY KEY,
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    spec_json     TEXT NOT NULL,
    state         TEXT NOT NULL DEFAULT 'queued'
                  CHECK (state IN ('queued','running','awaiting_decision','done','failed','aborted')),
    reason        TEXT,
    verdict_json  TEXT,
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    updated_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

CREATE TABLE runs (
    id             INTEGER PRIMARY KEY,
    sweep_id       INTEGER NOT NULL REFERENCES sweeps(id),
    seq            INTEGER NOT NULL,
    label          TEXT NOT NULL,
    params_json    TEXT NOT NULL,
    nodes          TEXT NOT NULL,
    state          TEXT NOT NULL DEFAULT 'pending'
                   CHECK (state IN ('pending','active','passed','failed','cancelled')),
    outcome        TEXT,
    tgs            REAL,
    mfu            REAL,
    failure_class  TEXT,
    detail         TEXT,
    not_before     REAL,
    UNIQUE (sweep_id, label),
    UNIQUE (sweep_id, seq)
);

CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    run_id            INTEGER NOT NULL REFERENCES runs(id),
    sweep_id          INTEGER NOT NULL REFERENCES sweeps(id),
    attempt           INTEGER NOT NULL,
    token             TEXT NOT NULL UNIQUE,
    job_name          TEXT NOT NULL,
    nodes             TEXT NOT NULL,
    backend_id        TEXT,
    log_path          TEXT,
    state             TEXT NOT NULL DEFAULT 'submitting'
                      CHECK (state IN ('submitting','queued','running','hung','retried',
                                       'done','failed','cancelled')),
    scheduler_state   TEXT,
    submitted_at      REAL,
    ended_at          REAL,
    log_offset        INTEGER NOT NULL DEFAULT 0,
    log_identity      TEXT,
    last_output_at    REAL,
    phase             TEXT NOT NULL DEFAULT 'prolog',
    last_step         INTEGER,
    profiler          INTEGER NOT NULL DEFAULT 0,
    mem_used_gb       REAL,
    mem_limit_gb      REAL,
    summary_status    TEXT,
    summary_exit      INTEGER,
    node_map_json     TEXT,
    tgs               REAL,
    mfu               REAL,
    failure_class     TEXT,
    failure_node      TEXT,
    failure_line      TEXT,
    failure_detail    TEXT,
    UNIQUE (run_id, attempt)
);
CREATE INDEX jobs_by_sweep ON jobs(sweep_id);
CREATE INDEX jobs_by_state ON jobs(state);

CREATE TABLE steps (
    job_id   INTEGER NOT NULL REFERENCES jobs(id),
    step     INTEGER NOT NULL,
    seconds  REAL,
    tflops   REAL,
    mfu      REAL,
    tgs      REAL NOT NULL,
    loss     REAL,
    PRIMARY KEY (job_id, step)
);

-- Log lines that matched a failure signature: the evidence classification rests on.
CREATE TABLE signals (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs(id),
    offset      INTEGER NOT NULL,
    rank        INTEGER,
    node        TEXT,
    klass       TEXT NOT NULL,
    detail      TEXT,
    line        TEXT NOT NULL,
    UNIQUE (job_id, offset)
);

CREATE TABLE exclusions (
    sweep_id  INTEGER NOT NULL REFERENCES sweeps(id),
    node      TEXT NOT NULL,
    job_id    INTEGER REFERENCES jobs(id),
    reason    TEXT NOT NULL,
    active    INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (sweep_id, node)
);

CREATE TABLE events (
    id         INTEGER PRIMARY KEY,
    sweep_id   INTEGER NOT NULL REFERENCES sweeps(id),
    run_id     INTEGER REFERENCES runs(id),
    job_id     INTEGER REFERENCES jobs(id),
    at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    kind       TEXT NOT NULL CHECK (kind IN ('transition','decision','progress','note')),
    from_state TEXT,
    to_state   TEXT,
    rule       TEXT,
    reason     TEXT NOT NULL,
    evidence   TEXT
);
CREATE INDEX events_by_sweep ON events(sweep_id, id);
