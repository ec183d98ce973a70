"""One thin module per CLI verb; each exposes ``register(app)``."""
