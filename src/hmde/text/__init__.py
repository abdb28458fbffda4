"""Text before it is embedded: sentence segmentation (with script-specific splitters) and language codes and coverage."""
