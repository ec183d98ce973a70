"""What the workloads share: code that is the same rule for every workload (not the orchestrator's:
a workload never imports that). Everything here runs inside the workloads' images and wheels."""
