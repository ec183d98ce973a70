"""The results store: the run layout on disk, atomic writes, typed records, run folders, the index."""
