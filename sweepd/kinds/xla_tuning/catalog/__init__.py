"""What may be tuned and what it does: the flag catalog (the GPU's XLA/NCCL flags, the TPU's
libtpu flags), each flag's image default, and the flag-effect landscape of a (model x parallelism)
cell with the real cells' figures as its default. Imports nothing else of the kind."""
