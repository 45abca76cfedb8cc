"""Small helpers any layer may use; they import nothing else of sweepd's."""
