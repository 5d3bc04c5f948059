"""The tally rule on its own: every threshold kind at its boundaries, before and after expiry."""

from __future__ import annotations

import pytest

from twinhub.services.governance import (
    ABSOLUTE_COUNT,
    ABSOLUTE_PERCENTAGE,
    OPEN,
    PASSED,
    REJECTED,
    THRESHOLD_QUORUM,
    Tally,
    decide,
    votes_needed,
)


@pytest.mark.parametrize(
    ("yes", "no", "abstain", "ended", "outcome"),
    [
        (2, 0, 0, False, OPEN),  # 2 of 3 needed, 4 weight still to vote
        (3, 0, 0, False, PASSED),  # exactly the threshold
        (2, 4, 0, False, REJECTED),  # yes 2 + remaining 0 < 3
        (2, 3, 0, False, OPEN),  # yes 2 + remaining 1 = 3: can still pass
        (2, 0, 0, True, REJECTED),  # period over, not reached
    ],
)
def test_absolute_count(yes: int, no: int, abstain: int, ended: bool, outcome: str) -> None:
    assert decide(ABSOLUTE_COUNT, 3, None, Tally(yes, no, abstain, 6), ended) == outcome


@pytest.mark.parametrize(
    ("yes", "no", "abstain", "ended", "outcome"),
    [
        (3, 0, 0, False, PASSED),  # 50 % of 6 exactly
        (2, 0, 0, False, OPEN),
        (2, 2, 0, False, OPEN),  # 2 + 2 remaining can still reach 3
        (2, 3, 0, False, OPEN),  # 2 + 1 remaining = 3: can still pass
        (2, 4, 0, False, REJECTED),  # 2 + 0 remaining < 3
        (2, 0, 3, False, OPEN),  # abstain is not yes: 2 + 1 = 3 still possible
        (2, 0, 0, True, REJECTED),
    ],
)
def test_absolute_percentage(yes: int, no: int, abstain: int, ended: bool, outcome: str) -> None:
    assert decide(ABSOLUTE_PERCENTAGE, 0.5, None, Tally(yes, no, abstain, 6), ended) == outcome


@pytest.mark.parametrize(
    ("yes", "no", "abstain", "ended", "outcome"),
    [
        (4, 0, 0, False, PASSED),  # even if the other 2 vote no: 4 >= 0.5 x 6, quorum met
        (3, 0, 0, False, PASSED),  # 3 vs a possible 3 no: 3 >= 0.5 x 6; quorum 3 of 6 met
        (2, 0, 0, False, OPEN),  # could still fail
        (1, 0, 0, True, REJECTED),  # after the end, 1 of 6 voted: the quorum is not met
        (0, 4, 0, False, REJECTED),  # 0 + 2 remaining < 0.5 x (2 + 4)
        (2, 1, 0, True, PASSED),  # quorum 3 of 6 met, 2 >= 0.5 x 3
        (1, 1, 1, True, PASSED),  # abstain counts for quorum, not threshold: 1 >= 0.5 x 2
        (1, 2, 0, True, REJECTED),  # threshold not met
        (0, 0, 3, True, REJECTED),  # quorum met only by abstentions: nobody said yes
    ],
)
def test_threshold_with_quorum(yes: int, no: int, abstain: int, ended: bool, outcome: str) -> None:
    tally = Tally(yes, no, abstain, 6)
    assert decide(THRESHOLD_QUORUM, 0.5, 0.5, tally, ended) == outcome


def test_votes_needed_rounds_up() -> None:
    assert votes_needed(6, 0.5) == 3
    assert votes_needed(7, 0.5) == 4
    assert votes_needed(3, 2 / 3) == 2
