"""What MLPerf defines: reading MLLOG, the scoring rules, the MLCommons export, system descriptions."""
