"""The Docker backend: engine connection, GPU requests, image builds, probes and the runner."""
