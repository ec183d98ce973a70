"""Run profiles (``seeds.yaml``): typed, frozen, validated on load; errors name the field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from orchestrator.config.files import read_yaml, validated
from orchestrator.config.numbers import Positive
from orchestrator.config.seedspec import SeedSpec
from orchestrator.errors import ConfigError, UsageError

ProfileName = Literal["qualify", "mlperf", "smoke"]
"""The profiles every workload has: the names are defined here and nowhere else."""
PROFILE_NAMES: tuple[ProfileName, ...] = get_args(ProfileName)
DEFAULT_PROFILE: ProfileName = "qualify"
MLPERF: ProfileName = "mlperf"
"""The profile that follows MLPerf's rules: its runs and drops are the benchmark's
(`orchestrator.mlperf.benchmarks`), never written in seeds.yaml."""
SMOKE: ProfileName = "smoke"
"""Synthetic data and a scaled-down model: proves the pipeline, comparable with nothing."""
OFFICIAL_FIELDS = ("runs", "drop_per_end", "max_non_converged")
"""What the mlperf profile takes from MLPerf's rules for the benchmark."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_values_are_strings(value: object) -> object:
    if isinstance(value, dict):
        empty = [k for k, v in value.items() if v is None]
        if empty:  # YAML's `A:` or `A: null` is no value, not the text "None"
            raise ValueError(f"{empty[0]} has no value: write {empty[0]}: '' for an empty string, or remove it")
        return {str(k): str(v) for k, v in value.items()}
    return value


def _env_names_are_variables(value: dict[str, str]) -> dict[str, str]:
    bad = [k for k in value if not _ENV_NAME.match(k)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not an environment variable name (letters, digits, '_')")
    return value


def _seed_spec(value: object) -> object:
    if isinstance(value, SeedSpec):
        return value
    if not isinstance(value, str):
        raise ValueError("a seed spec is text: \"1-9\", \"1,3,5-7\" or \"random:40\"")
    try:
        return SeedSpec.parse(value)
    except UsageError as exc:
        raise ValueError(str(exc)) from None


Seeds = Annotated[SeedSpec, BeforeValidator(_seed_spec)]
"""A seed spec as seeds.yaml writes it ("1-9", "random:40"), parsed where the file is read."""

EnvVars = Annotated[dict[str, str], BeforeValidator(_env_values_are_strings), AfterValidator(_env_names_are_variables)]
"""Variables handed to run_and_time.sh: names of letters, digits and '_', string values."""


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)


class DatasetSpec(_Frozen):
    """Where a profile's data comes from."""

    source: Literal["real", "synthetic"] = "real"
    """real: the user supplies --data; synthetic: made by the workload's `synthesize` on first use."""
    args: tuple[str, ...] = ()
    """Arguments for the workload's `synthesize` (synthetic source: size, cases ...) or `prepare`
    (real source: how raw data is made training-ready)."""


class RealData(_Frozen):
    """What a profile changes when its seeds read real data (the user's --data) instead of the
    profile's synthetic set: the smoke profile's cuts (fewer cases, cropped evaluation), which the
    workload logs and the summary states."""

    env: EnvVars = {}
    """Variables added over the profile's ``env``."""


class Profile(_Frozen):
    """How one workload is run and scored under one profile."""

    name: str
    seeds: Seeds = SeedSpec(listed=tuple(range(1, 10)), text="1-9")
    """Default seed spec (1-9)."""
    runs: int | None = Field(default=None, ge=1)
    """Runs a valid result needs; None: as many as seeds given."""
    drop_per_end: int = Field(default=1, ge=0)
    """Olympic scoring: fastest runs dropped (and slowest, less the non-converged)."""
    max_non_converged: int = Field(default=1, ge=0)
    """More non-converged runs than this make the result invalid."""
    target: Positive | None = None
    """Quality target; None: the workload's own."""
    timeout_minutes: Positive = 1440
    """Wall-clock limit of one run."""
    dataset: DatasetSpec = DatasetSpec()
    env: EnvVars = {}
    """Variables handed to run_and_time.sh."""
    real_data: RealData | None = None
    """On real data: what changes (see `RealData`); None: nothing."""

    @model_validator(mode="before")
    @classmethod
    def _mlperf_takes_the_rules(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("name") == MLPERF:
            stated = [field for field in OFFICIAL_FIELDS if field in data]
            if stated:
                raise ValueError(f"{', '.join(stated)}: the {MLPERF} profile takes the runs and drops from MLPerf's"
                                 " rules for the benchmark (orchestrator/mlperf/benchmarks.py); remove them")
            if "real_data" in data:
                raise ValueError(f"real_data: the {MLPERF} profile runs the benchmark on its whole data; remove it")
        return data

    @model_validator(mode="after")
    def _non_converged_fits_drops(self) -> Profile:
        if self.max_non_converged > self.drop_per_end:
            raise ValueError(
                f"max_non_converged ({self.max_non_converged}) exceeds drop_per_end ({self.drop_per_end}):"
                " a non-converged run counts as a dropped slow run"
            )
        return self

    @property
    def is_mlperf(self) -> bool:
        return self.name == MLPERF

    def following(self, *, runs: int, drop_per_end: int, max_non_converged: int) -> Profile:
        """The mlperf profile under MLPerf's rule for the benchmark: exactly ``runs`` runs, scored
        dropping ``drop_per_end`` at each end; its seeds are ``runs`` drawn at random unless
        seeds.yaml names them."""
        seeds = self.seeds if "seeds" in self.model_fields_set else SeedSpec(random=runs)
        return self.model_copy(update={"runs": runs, "drop_per_end": drop_per_end,
                                       "max_non_converged": max_non_converged, "seeds": seeds})


class Profiles(_Frozen):
    """All profiles of all workloads."""

    default_profile: ProfileName = DEFAULT_PROFILE
    workloads: dict[str, dict[ProfileName, Profile]]

    @model_validator(mode="before")
    @classmethod
    def _name_profiles(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("workloads"), dict):
            for profiles in data["workloads"].values():
                if isinstance(profiles, dict):
                    for name, body in profiles.items():
                        if isinstance(body, dict):
                            body.setdefault("name", name)
        return data

    def get(self, workload: str, profile: str | None) -> Profile:
        name = profile or self.default_profile
        if name not in PROFILE_NAMES:
            raise ConfigError(f"unknown profile {name!r}: choose one of {', '.join(PROFILE_NAMES)}")
        profiles = self.workloads.get(workload)
        if profiles is None or name not in profiles:
            raise ConfigError(f"seeds.yaml has no profile {name!r} for workload {workload!r}")
        return profiles[name]


def load_profiles(path: Path) -> Profiles:
    """Read and validate seeds.yaml; any problem is a ConfigError naming file and field."""
    return validated(Profiles, read_yaml(path, missing="profile file not found"), label=str(path))
