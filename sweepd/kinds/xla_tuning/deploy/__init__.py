"""What `report --apply` writes and what a model's env file leaves in effect: the verdict's
recipe for exactly the cell's parallelism (`deploy`), the overrides every tuning job carries
(`job_overrides`), the env file sourced by a real bash (`sourced`) and the recipe's block written
into it (`hooks_apply`)."""
