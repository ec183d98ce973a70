"""mltrain: an MLPerf-style training-benchmark orchestrator."""

__version__ = "0.1.0"
