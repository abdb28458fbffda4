"""Pieces shared by hmde's trainers: checkpoints, logs, precision."""
