# Image of the MLPerf Inference harness (workloads/inference: the real LoadGen, ONNX Runtime, torch).
# Built by `mltrain build`-style image handling when `mltrain infer --runner docker` runs; the
# orchestrator runs `run_inference.sh` in it with the dataset at /data (read only) and the run's
# results folder at /results (the model staged there).
#
# BASE_IMAGE: any image with Python >= 3.10 and torch. Default: the NGC PyTorch image (CUDA, cuDNN,
# TensorRT libraries), where onnxruntime-gpu brings the CUDA and TensorRT execution providers.
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.04-py3
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# What the harness imports beyond torch and numpy; the smoke models train with the resnet50 and
# unet3d workloads (mlperf-logging, pillow); 3d-unet's KiTS19 is read with nibabel and resampled
# with scipy (the reference's zoom).
RUN python -m pip install "mlcommons-loadgen>=6.0" "onnxruntime-gpu>=1.17" "onnx>=1.15" \
        "opencv-python-headless>=4.8" "pycocotools>=2.0.7" "mlperf-logging==4.1.68" "pillow>=10" \
        "nibabel>=5" "scipy>=1.15"

WORKDIR /workspace
COPY workloads/ /workspace/workloads/
ENTRYPOINT ["bash", "workloads/inference/run_inference.sh"]
