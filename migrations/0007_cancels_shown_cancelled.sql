-- A job a person cancelled outside sweepd (failure class `cancelled`) that was run again
-- was stored as `retried` before version 7; it is shown as what happened: cancelled.
UPDATE jobs SET state = 'cancelled' WHERE state = 'retried' AND failure_class = 'cancelled';
