"""HMDE contrastive pretraining on comparable corpora: pair building and the trainer."""
