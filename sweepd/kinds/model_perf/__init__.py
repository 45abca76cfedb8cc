"""Model perf: the batch size with the highest steady TGS."""
