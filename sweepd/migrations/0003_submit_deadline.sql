-- sweepd schema, version 3: submissions whose outcome a crash left open. Never edit once landed.
-- submit_deadline: when (clock seconds) the submitting command of a write-ahead job is killed
-- by its own timeout; until then an earlier attempt of that job may still reach the queue.
ALTER TABLE jobs ADD COLUMN submit_deadline REAL;

-- This store's identity, carried in every token it issues: a job in the queue whose token
-- names this store but matches no job of it can only be an unwanted duplicate; a token
-- of another store (another sweepd on the same cluster) is never touched.
INSERT INTO daemon_state (key, value) VALUES ('store.id', lower(hex(randomblob(3))));
