"""The XLA tuning kind's part of the simulated cluster: the scenario's `tuning:` section, its
jobs' flags and outcomes, and their HLO dumps (`hook.py` is what the simulator calls)."""
