# Image of the resnet50 workload (MLPerf Training image classification, ResNet-50 on ImageNet).
# Built by `mltrain build resnet50`; the orchestrator runs `run_and_time.sh <seed>` in it with the
# dataset at /data (read only) and the seed's results folder at /results.
#
# BASE_IMAGE: any image with Python >= 3.10, torch and torchvision on PATH. Default: the NGC
# PyTorch image of the MLPerf Training v4.0 round (CUDA, cuDNN, NCCL, torchvision included).
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.04-py3
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# Only what the workload imports beyond torch, torchvision and numpy (training and its dataset
# commands, which mltrain runs in this image for --runner docker).
RUN python -m pip install "mlperf-logging==4.1.68" "pillow>=10"

WORKDIR /workspace
COPY workloads/ /workspace/workloads/
ENTRYPOINT ["bash", "workloads/resnet50/run_and_time.sh"]
