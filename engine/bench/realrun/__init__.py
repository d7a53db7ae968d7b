"""Real-run fault-injection corpus (`l4 bench realrun`): real torchrun/gloo training programs on the
CPU, several launcher agents on this machine standing in for nodes, faults injected into them, and
labels found afterwards in the logs they really wrote.

`plan` decides the cases (kinds, styles, seeds, the dev/test split), `launch` runs one job,
`label` finds the root, cascade and context lines, `corpus` ties them together. Only the programs
under ``programs/`` import torch; everything else runs (and is tested) without it.
"""
