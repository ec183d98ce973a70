"""A benchmark run as it happens: the plan, the run loop, one seed, datasets, imported runs."""
