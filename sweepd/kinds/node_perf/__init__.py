"""Node perf: a 1-node run per node, each judged against the median."""
