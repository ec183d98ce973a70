"""The llama31_8b benchmark's MLLOG keys and values: what ``training_6.1.0/closed_llama31_8b.yaml``
and the 6.1.0 common rules ask a run to state, from its config and its process layout. The logger
and mltrain's own keys are the kit's (``workloads.common.mllog``)."""

from __future__ import annotations

from mlperf_logging.mllog import constants as c

from workloads.llama31_8b.config import TrainConfig

LOG_FILE = "mllog.txt"
"""The MLLOG file in the results folder."""
CONFIG_FILENAME = "workloads/llama31_8b/config.py"
"""``config_filename``: where the run's hyperparameters are written (the presets, and the overrides
the run logs in ``resolved_settings``)."""
DECAY_SCHEDULE = "cosine with linear warmup"
NUMERIC_NAMES = {"bf16": "bfloat16", "fp16": "fp16", "fp32": "fp32"}


def hyperparameters(config: TrainConfig, *, processes: int, precision: str) -> dict[str, object]:
    """Every configuration key of the rules, in the order the reference logs them."""
    lowest = NUMERIC_NAMES[precision]
    return {
        c.GLOBAL_BATCH_SIZE: config.global_batch,
        c.GRADIENT_ACCUMULATION_STEPS: config.accumulation(processes),
        c.MICRO_BATCH_SIZE: config.micro_batch_for(processes),
        c.MAX_SEQUENCE_LENGTH: config.seq_len,
        c.EVAL_SAMPLES: config.eval_samples,
        c.MAX_STEPS: config.max_steps,
        c.OPT_NAME: "adamw",
        c.OPT_BASE_LR: config.base_lr,
        c.OPT_ADAMW_BETA_1: config.beta1,
        c.OPT_ADAMW_BETA_2: config.beta2,
        c.OPT_ADAMW_EPSILON: config.eps,
        c.OPT_ADAMW_WEIGHT_DECAY: config.weight_decay,
        c.OPT_GRADIENT_CLIP_NORM: config.clip,
        c.OPT_END_LR: config.end_lr,
        c.OPT_LR_WARMUP_STEPS: config.warmup_steps,
        c.OPT_LR_DECAY_STEPS: config.max_steps - config.warmup_steps,
        c.OPT_LR_DECAY_SCHEDULE: DECAY_SCHEDULE,
        c.INIT_CHECKPOINT_STEP: 0,
        # parallelism: data parallel (FSDP) only
        c.TENSOR_PARALLELISM: 1,
        c.PIPELINE_PARALLELISM: 1,
        c.CONTEXT_PARALLELISM: 1,
        c.EXPERT_PARALLELISM: 1,
        # autocast: linear layers and attention in the compute precision, gradients reduced in fp32
        c.LOWEST_NUMERICAL_PRECISION_IN_LINEAR: lowest,
        c.LOWEST_NUMERICAL_PRECISION_IN_ATTN: lowest,
        c.LOWEST_NUMERICAL_PRECISION_IN_COMM: "fp32",
        c.CONFIG_FILENAME: CONFIG_FILENAME,
    }
