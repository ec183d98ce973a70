#!/bin/bash
#SBATCH --job-name=mltrain-fakebench-qualify-1-seed7
#SBATCH --output=/results/run/seeds/7/slurm-job.out
#SBATCH --chdir=@WORKLOAD@
#SBATCH --time=90
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --comment=mltrain.job=seed7;mltrain.kind=seed;mltrain.run_id=fakebench-qualify-1;mltrain.seed=7;mltrain.workload=fakebench
#SBATCH --partition=gpu
#SBATCH --gres=gpu:8
set -euo pipefail
export PATH=@PYTHON_BIN@:"$PATH"
export CUDA_DEVICE_ORDER=PCI_BUS_ID
export DATADIR=/data/fake
export MLTRAIN_PROFILE=qualify
export MLTRAIN_RUN_ID=fakebench-qualify-1
export ODD='a b'"'"'c;$(rm -rf /)'
export PYTHONPATH=/repo
export QUALITY_THRESHOLD=0.908
export RESULTS_DIR=/results/run/seeds/7/results
exec python -m orchestrator.insight.node_telemetry /results/run/seeds/7/nodes -- bash run_and_time.sh 7
