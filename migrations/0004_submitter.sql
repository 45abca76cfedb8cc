-- sweepd schema, version 4: who submitted a sweep. Never edit once landed.
-- The user name of the socket peer (SO_PEERCRED) at submit; NULL for sweeps from before
-- this version and for `sweepd run`/`demo`, which no one submits over the socket.
ALTER TABLE sweeps ADD COLUMN submitted_by TEXT;
