"""What the planner reads beyond the sweep's own runs: the model's env file as the sweep's
jobs see it (`inventory`), the latest model-perf optimum with it (`planner_facts`), and what the
file sets now that the sweep did not measure (`since_sweep`)."""
