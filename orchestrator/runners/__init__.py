"""Runner backends: each file implements the `Runner` interface of `base.py` for one place runs go."""
