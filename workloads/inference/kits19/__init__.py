"""KiTS19 for MLPerf Inference 3D-UNet: the reference's preprocessing, its case list and checksums
(its meta/ files, kept as they are), the prepared dataset."""
