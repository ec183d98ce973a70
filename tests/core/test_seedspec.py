import pytest

from orchestrator.config.seedspec import AUTO, SeedSpec, parse_option
from orchestrator.errors import UsageError


@pytest.mark.parametrize(
    ("spec", "seeds"),
    [
        ("1-9", list(range(1, 10))),
        ("1,3,5-7", [1, 3, 5, 6, 7]),
        ("42", [42]),
        (" 2 , 4-5 ", [2, 4, 5]),
        ("0-2", [0, 1, 2]),
    ],
)
def test_ranges_and_lists(spec, seeds):
    parsed = SeedSpec.parse(spec)
    assert (list(parsed.seeds()), bool(parsed.random)) == (seeds, False)


def test_random_seeds_are_distinct_positive_and_flagged():
    spec = SeedSpec.parse("random:40")
    seeds, drawn = spec.seeds(), bool(spec.random)
    assert drawn and len(seeds) == 40 and len(set(seeds)) == 40 and all(s > 0 for s in seeds)
    assert spec.seeds() != seeds  # drawn again each time the seeds are taken
    assert str(spec) == "random:40"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("9-1", "runs backwards"),
        ("0-", "is not a seed or range"),
        ("a", "is not a seed or range"),
        ("", "empty seed spec"),
        ("1,2,2", "given twice"),
        ("1-5,3", "given twice"),
        ("random:0", "random:N needs"),
        ("1-99999", "more than 10000"),
    ],
)
def test_bad_specs_say_why(spec, message):
    with pytest.raises(UsageError, match=message):
        SeedSpec.parse(spec)


def test_the_total_is_capped_and_the_duplicate_check_is_linear():
    import time

    with pytest.raises(UsageError, match="more than 10000 seeds in all"):
        SeedSpec.parse("10000-19999,20000-29999")
    started = time.perf_counter()
    seeds = SeedSpec.parse(",".join(f"{i * 1000}-{i * 1000 + 999}" for i in range(10))).seeds()  # 10000 seeds
    assert len(seeds) == 10000 and time.perf_counter() - started < 0.5
    with pytest.raises(UsageError, match=r"seed\(s\) 5000, 5001, .* given twice"):
        SeedSpec.parse("0-5999,5000-8000")


def test_the_option_is_a_spec_auto_or_nothing_and_a_run_that_decides_takes_its_seeds_in_order():
    assert parse_option(None) is None and parse_option(" auto ") == AUTO
    assert parse_option("1-3") == SeedSpec(listed=(1, 2, 3))
    assert SeedSpec.parse("2,5").order(5) == (2, 5, 6, 7, 8)  # the listed seeds, then the next integers
    assert SeedSpec.parse("1-9").order(3) == (1, 2, 3)
    drawn = SeedSpec.parse("random:3").order(6)
    assert len(set(drawn)) == 6
