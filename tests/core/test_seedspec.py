import pytest

from orchestrator.config.seedspec import parse_seeds
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
    assert parse_seeds(spec) == (seeds, False)


def test_random_seeds_are_distinct_positive_and_flagged():
    seeds, drawn = parse_seeds("random:40")
    assert drawn and len(seeds) == 40 and len(set(seeds)) == 40 and all(s > 0 for s in seeds)
    assert parse_seeds("random:40")[0] != seeds


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
        parse_seeds(spec)


def test_the_total_is_capped_and_the_duplicate_check_is_linear():
    import time

    with pytest.raises(UsageError, match="more than 10000 seeds in all"):
        parse_seeds("10000-19999,20000-29999")
    started = time.perf_counter()
    seeds, _ = parse_seeds(",".join(f"{i * 1000}-{i * 1000 + 999}" for i in range(10)))  # 10000 seeds
    assert len(seeds) == 10000 and time.perf_counter() - started < 0.5
    with pytest.raises(UsageError, match=r"seed\(s\) 5000, 5001, .* given twice"):
        parse_seeds("0-5999,5000-8000")
