-- sweepd schema, version 12: two partial indexes, each over the few rows a frequent
-- question asks about, so its cost does not grow with the sweeps and jobs kept.
-- Model perf's gather (every plan) asks for the latest job on exactly a sweep's nodes that
-- recorded its param memory: without an index SQLite walked every job of the model's
-- sweeps; with it, only the jobs on those nodes with a memory line, newest first.
CREATE INDEX jobs_with_memory_by_nodes ON jobs(nodes, id) WHERE mem_used_gb IS NOT NULL;
-- The engine (every pass) asks which sweeps have a retry whose waiting time is over:
-- without an index SQLite read every run (5 ms a pass at 10,000 runs); with it, only the
-- runs that were given a retry time.
CREATE INDEX runs_with_retry_time ON runs(not_before) WHERE not_before IS NOT NULL;
