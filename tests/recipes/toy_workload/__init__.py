"""A toy workload (docs/new_workload.md): a linear model fitted on synthetic points."""
