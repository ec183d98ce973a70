# Image of the unet3d workload (MLPerf Training image segmentation, 3D U-Net on KiTS19).
# Built by `mltrain build unet3d`; the orchestrator runs `run_and_time.sh <seed>` in it with the
# dataset at /data (read only) and the seed's results folder at /results.
#
# BASE_IMAGE: any image with Python >= 3.10 and torch on PATH. Default: the NGC PyTorch image of
# the MLPerf Training v4.0 round (CUDA, cuDNN, NCCL, numpy, scipy included). Tests build on a
# local Debian + torch CPU base instead (.ci/base-images.sh).
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.04-py3
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# Only what the workload imports beyond torch and numpy, for training and for its dataset commands
# (synthesize, prepare: mltrain runs them in this image for --runner docker); before the code, so
# that a code change reuses this layer.
RUN python -m pip install "mlperf-logging==4.1.68" "nibabel>=5,<6" "scipy>=1.10"

WORKDIR /workspace
COPY workloads/ /workspace/workloads/
ENTRYPOINT ["bash", "workloads/unet3d/run_and_time.sh"]
