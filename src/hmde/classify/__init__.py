"""Cross-lingual classification with your own labels: a classifier trained on document vectors in one language, predicting in any."""
