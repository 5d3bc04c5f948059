"""No class in twinhub does more than one job: a class over MAX_METHODS methods is a sign of
several (issue 28, "Classes of one job"). Counted from the source, so nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "twinhub"
MAX_METHODS = 25
# Classes allowed over the line while their split is under way (none: ClaimService is now
# ClaimCollections, ClaimSubmissions, ClaimEvaluations and ClaimViews).
ALLOWED: set[str] = set()


def method_counts() -> dict[str, int]:
    """Methods (plain and async, properties included) defined in each class's own body."""
    counts = {}
    for path in sorted(SOURCE.rglob("*.py")):
        where = path.relative_to(SOURCE.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                methods = [
                    item
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
                counts[f"{where}:{node.name}"] = len(methods)
    return counts


def test_no_class_has_more_than_max_methods() -> None:
    counts = method_counts()
    offenders = sorted(
        f"{name} ({n} methods)"
        for name, n in counts.items()
        if n > MAX_METHODS and name not in ALLOWED
    )
    assert not offenders, f"classes over {MAX_METHODS} methods: {', '.join(offenders)}"


def test_allowed_exceptions_still_exist() -> None:
    """An exception left after its class was split would hide the next one over the line."""
    counts = method_counts()
    assert all(counts.get(name, 0) > MAX_METHODS for name in ALLOWED)
