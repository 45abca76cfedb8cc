"""sweepd: unattended GPU-cluster sweeps."""
