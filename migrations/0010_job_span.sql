-- sweepd schema, version 10: every job's span on the cluster's own clock, in that clock's
-- seconds, where its log prints one (the simulated cluster's JOB SUMMARY `Cluster time:
-- <start>s to <end>s`; its clock is not the machine's, which runs its jobs compressed and
-- its passes' latency stretched). Read once by the log pass, for every kind's job; NULL
-- where the log prints none (a real Slurm cluster: there the job's submitted_at and
-- ended_at are on the cluster's clock). Jobs from before this version get the span the XLA
-- tuning kind kept in their facts, when it kept one. Never edit once landed.
ALTER TABLE jobs ADD COLUMN span_start REAL;
ALTER TABLE jobs ADD COLUMN span_end REAL;
UPDATE jobs SET span_start = json_extract(facts_json, '$.span[0]'),
                span_end = json_extract(facts_json, '$.span[1]')
    WHERE json_valid(facts_json) AND json_type(facts_json, '$.span') = 'array';
