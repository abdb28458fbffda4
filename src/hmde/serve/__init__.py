"""The HTTP server (``hmde serve``): one model and some indexes loaded once, behind the OpenAI embeddings
API, hmde's own /embed and /search, Prometheus metrics and a search page. Needs ``pip install 'hmde[serve]'``."""
