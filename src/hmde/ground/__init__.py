"""The storage ground every layer stands on: atomic writes, locks, replaceable outputs, stale temporaries and the cache folder."""
