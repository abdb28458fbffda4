"""The models that turn text into vectors: the hierarchical encoder, its lower and upper encoders, their settings, saved folders, loading, the registry of names and the routing between them."""
