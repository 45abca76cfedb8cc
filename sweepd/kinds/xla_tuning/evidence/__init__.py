"""What the runs say: each job's log, HLO dump and stored facts read once (`logread`,
`jobfacts`, `logfacts`), whether a profile's values won in its job (`applied`), and the results
as the planner keeps them, with the board's readings of them (`results`, `board`, `board_build`,
`drift`), and what the runs measured of the cell's noise (`measured_noise`). Decides what a
run measured, not what to run next."""
