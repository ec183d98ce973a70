"""MLPerf Training small-LLM pretraining: Llama 3.1 8B on C4 (workloads/README.md is the contract)."""
