"""Model sweep: every model at a commit against a baseline."""
