-- sweepd schema, version 8: the facts a sweep's kind wants from each of its jobs, as one
-- JSON document per job (`Kind.job_facts`): folded from the log's lines as the monitor reads
-- them, in the transaction that stores the log's offset, and completed once when the job
-- ends (e.g. the XLA tuning kind's effective flags, unknown flags, and an evidence run's HLO
-- shares). NULL: the kind wants none, or nothing was found yet. Never edit once landed.
ALTER TABLE jobs ADD COLUMN facts_json TEXT;
