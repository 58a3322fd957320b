"""The GPU harness (harness.py, the one entry script; docs/measurements.md, "A real GPU in the loop")."""
