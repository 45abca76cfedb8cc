-- sweepd schema, version 4: MaxText's compiled-memory line, per job. Never edit once landed.
-- `Total memory size: … GB, Output size: … GB, Temp size: … GB, Argument size: … GB,
-- Host temp size: … GB.` (rank 0). Temp grows about linearly with the batch: the model perf
-- search predicts the largest batch that fits from it.
ALTER TABLE jobs ADD COLUMN mem_total_gb REAL;
ALTER TABLE jobs ADD COLUMN mem_output_gb REAL;
ALTER TABLE jobs ADD COLUMN mem_temp_gb REAL;
ALTER TABLE jobs ADD COLUMN mem_argument_gb REAL;
ALTER TABLE jobs ADD COLUMN mem_host_temp_gb REAL;
