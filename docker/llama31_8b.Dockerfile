# Image of the llama31_8b workload (MLPerf Training small-LLM pretraining, Llama 3.1 8B on C4).
# Built by `mltrain build llama31_8b`; the orchestrator runs `run_and_time.sh <seed>` in it with the
# dataset at /data (read only) and the seed's results folder at /results.
#
# BASE_IMAGE: any image with Python >= 3.10 and torch >= 2.6 (FSDP2's public `fully_shard`, SDPA's
# grouped-query attention) on PATH. Default: the NGC PyTorch image 25.04 (torch 2.7, CUDA 12.9, NCCL).
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:25.04-py3
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# Only what the workload imports beyond torch and numpy (training, the throughput mode and the
# dataset commands, which mltrain runs in this image for --runner docker).
RUN python -m pip install "mlperf-logging==4.1.68"

WORKDIR /workspace
COPY workloads/ /workspace/workloads/
ENTRYPOINT ["bash", "workloads/llama31_8b/run_and_time.sh"]
