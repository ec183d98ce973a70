"""The unet3d benchmark's MLLOG keys that ``mlperf_logging.mllog.constants`` does not define: the
strings the reference logs and the checker's ``closed_unet3d.yaml`` asks for. The logger and
mltrain's own keys are the kit's (``workloads.common.mllog``).
"""

from __future__ import annotations

OPT_MOMENTUM = "opt_momentum"
OVERSAMPLING = "oversampling"
TRAINING_INPUT_SHAPE = "training_input_shape"
VALIDATION_INPUT_SHAPE = "validation_input_shape"
VALIDATION_OVERLAP = "validation_overlap"
SAMPLES_PER_EPOCH = "samples_per_epoch"
