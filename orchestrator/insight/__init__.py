"""What the numbers mean: the system a run saw, telemetry, stored runs as setups, their statistics."""
