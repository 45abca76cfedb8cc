-- sweepd schema, version 12: an index for model perf's gather, which asks for the latest
-- job on exactly a sweep's nodes that recorded its param memory. Without it SQLite walked
-- every job of the model's sweeps (or every job) for each plan; with it, only the jobs that
-- ran on those nodes and recorded a memory line, newest first. Partial: jobs without a
-- memory line (most of them) are not in it.
CREATE INDEX jobs_with_memory_by_nodes ON jobs(nodes, id) WHERE mem_used_gb IS NOT NULL;
