"""Alignment across languages: similarity and margin scoring for documents, and the sentence aligner inside aligned documents."""
