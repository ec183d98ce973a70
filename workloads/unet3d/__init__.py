"""unet3d: 3D U-Net on KiTS19 (MLPerf Training image segmentation) as an mltrain workload."""
