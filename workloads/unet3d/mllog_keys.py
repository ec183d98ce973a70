"""MLLOG keys of the unet3d benchmark that ``mlperf_logging.mllog.constants`` does not define.

They are the strings the reference logs and the checker's ``closed_unet3d.yaml`` asks for.
"""

from __future__ import annotations

OPT_MOMENTUM = "opt_momentum"
OVERSAMPLING = "oversampling"
TRAINING_INPUT_SHAPE = "training_input_shape"
VALIDATION_INPUT_SHAPE = "validation_input_shape"
VALIDATION_OVERLAP = "validation_overlap"
SAMPLES_PER_EPOCH = "samples_per_epoch"
