"""The lightweight cross-lingual sentence encoder (Mao et al., 2021), trained from scratch.

A 2-layer transformer shared by both languages, trained on parallel sentences with a
unified generative task and two in-batch contrastive losses; saved as a standard
sentence-transformers folder (BERT + mean pooling) that becomes HMDE's lower encoder.
"""
