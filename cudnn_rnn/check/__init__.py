"""The checks: an independent float64 reference, the tolerances, and the comparison of
what cuDNN computed with it; NVIDIA's published golden checksums. Imports the engine."""
