"""The survey statistics (mrv/sampling.py): a reproducible draw, Student's t against the
tables, the achieved precision of a mean and of a share, the planned sample size."""

from __future__ import annotations

import hashlib
import math
from collections import Counter

import pytest

from twinhub.mrv.sampling import (
    draw,
    estimate,
    estimate_share,
    frame_digest,
    planned_size,
    t_quantile,
)

FRAME = [f"did:ixo:entity/stove-{n:04d}" for n in range(500)]


def test_the_same_seed_and_frame_draw_the_same_sample_whatever_the_order() -> None:
    sample = draw(FRAME, 40, "seed-1")
    assert len(sample) == len(set(sample)) == 40
    assert set(sample) <= set(FRAME)
    assert draw(list(reversed(FRAME)), 40, "seed-1") == sample
    assert draw(FRAME + FRAME[:10], 40, "seed-1") == sample  # duplicates count once
    assert draw(FRAME, 40, "seed-2") != sample
    # A larger sample from the same seed extends the smaller one: the order is the key's.
    assert draw(FRAME, 60, "seed-1")[:40] == sample
    assert draw(FRAME[:5], 40, "seed-1") == draw(FRAME[:5], 5, "seed-1")


def test_a_draw_is_pinned_to_its_seed() -> None:
    """The key is SHA-256(seed NUL unit): a change of the rule would change old samples."""
    keys = {u: hashlib.sha256(f"s\x00{u}".encode()).hexdigest() for u in "abcd"}
    assert draw(["a", "b", "c", "d"], 2, "s") == sorted(keys, key=keys.__getitem__)[:2]
    assert draw(["a", "b", "c", "d"], 2, "s") == ["d", "a"]


def test_every_unit_is_equally_likely_to_be_drawn() -> None:
    counts: Counter[str] = Counter()
    units = [f"u{n}" for n in range(20)]
    for seed in range(2000):
        counts.update(draw(units, 5, str(seed)))
    # 2000 draws of 5 of 20: each unit expected 500 times, sd about 19.4.
    assert all(abs(count - 500) < 100 for count in counts.values()), counts


def test_bad_draws_are_refused() -> None:
    with pytest.raises(ValueError):
        draw(FRAME, -1, "s")
    with pytest.raises(ValueError):
        draw(["a\x00b"], 1, "s")


def test_the_frame_digest_ignores_order_and_duplicates() -> None:
    digest = frame_digest(FRAME)
    assert digest.startswith("sha256:") and len(digest) == 71
    assert frame_digest(reversed(FRAME + FRAME)) == digest
    assert frame_digest(FRAME[1:]) != digest


@pytest.mark.parametrize(
    ("p", "df", "table", "tolerance"),
    [
        (0.95, 1, 6.3138, 1e-4),
        (0.95, 2, 2.9200, 1e-4),
        (0.975, 2, 4.3027, 1e-4),
        (0.95, 3, 2.3534, 0.01),
        (0.975, 3, 3.1824, 0.02),
        (0.95, 5, 2.0150, 0.005),
        (0.95, 10, 1.8125, 0.001),
        (0.975, 10, 2.2281, 0.001),
        (0.95, 30, 1.6973, 0.001),
        (0.95, 120, 1.6577, 0.001),
    ],
)
def test_student_t_matches_the_tables(p: float, df: int, table: float, tolerance: float) -> None:
    assert abs(t_quantile(p, df) - table) <= tolerance


def test_the_precision_of_a_mean_is_worked_by_hand() -> None:
    # Household sizes 3, 5, 4, 6, 2 from a frame of 100: mean 4, s = sqrt(2.5).
    result = estimate([3, 5, 4, 6, 2], 0.9, 100)
    assert result is not None
    half = 2.1318 * math.sqrt(2.5) / math.sqrt(5) * math.sqrt(1 - 5 / 100)
    assert result.value == 4
    assert result.sample_size == 5
    assert result.half_width == pytest.approx(half, rel=2e-3)
    assert result.precision == pytest.approx(half / 4, rel=2e-3)
    assert not result.meets(0.1)  # 0.37: five households fix nothing to 90/10


def test_a_share_has_the_wilson_interval() -> None:
    answers = [True] * 90 + [False] * 10  # 90 of 100 households use the stove
    result = estimate_share(answers, 0.9, 10_000)
    assert result is not None
    assert result.value == pytest.approx(0.9)
    z = 1.644854
    half = z / (1 + z * z / 100) * math.sqrt(0.09 / 100 + z * z / 40_000)
    half *= math.sqrt(1 - 100 / 10_000)
    assert result.half_width == pytest.approx(half, rel=1e-6)
    assert result.precision == pytest.approx(0.05508, abs=1e-4)
    assert result.meets(0.1)


def test_agreeing_answers_do_not_fix_a_share() -> None:
    """Two "yes" have no spread, but fix no share: Wilson's interval stays wide."""
    both = estimate_share([True, True], 0.9, 1000)
    assert both is not None and both.value == 1
    assert both.precision == pytest.approx(0.287, abs=0.002)
    assert not both.meets(0.1)
    nobody = estimate_share([False] * 50, 0.9, 1000)
    assert nobody is not None and nobody.precision is None and not nobody.meets(0.1)
    assert estimate_share([], 0.9, 10) is None


def test_a_census_is_exact_and_small_samples_have_no_precision() -> None:
    census = estimate([3, 5, 4], 0.9, 3)
    assert census is not None and census.half_width == 0 and census.meets(0.1)
    single = estimate([4], 0.9, 50)
    assert single is not None and single.precision is None and not single.meets(0.1)
    assert estimate([], 0.9, 50) is None
    zero = estimate([0.0, 0.0], 0.9, 50)  # a mean of zero has no relative precision
    assert zero is not None and zero.precision is None
    with pytest.raises(ValueError):
        estimate([1, 2], 1.0, 10)


def test_the_planned_size_for_90_10() -> None:
    # cv 0.5 at 90/10: n0 = (1.6449 * 0.5 / 0.1)^2 = 67.64; a frame of 1000: 63.4 -> 64.
    assert planned_size(1000, 0.9, 0.1, 0.5) == 64
    assert planned_size(10**9, 0.9, 0.1, 0.5) == 68
    assert planned_size(30, 0.9, 0.1, 0.5) <= 30
    assert planned_size(0, 0.9, 0.1, 0.5) == 0
    with pytest.raises(ValueError):
        planned_size(10, 0.9, 0.0, 0.5)
