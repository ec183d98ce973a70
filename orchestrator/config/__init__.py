"""Configuration: run profiles (seeds.yaml), the workload registry, seed specs, install locations."""
