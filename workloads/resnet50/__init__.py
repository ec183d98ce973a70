"""ResNet-50 v1.5 (MLPerf Training image classification) as an mltrain workload."""
