"""The methodology over a batch (its formulas as array operations, mrv.formula_arrays)
against the same methodology evaluated stove by stove by CEL: the shipped versions on
hypothesis-generated inputs, generated expressions, and the rows and formulas the arrays
leave to CEL. Outcomes are compared by their repr, so every float must match to the bit
(0.0 and -0.0 differ there) and every error must read the same."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from twinhub.kernel.errors import Problems
from twinhub.mrv.builtin import builtin_document, builtin_methodology
from twinhub.mrv.claims import methodology_of
from twinhub.mrv.formula_arrays import Unsupported, translate
from twinhub.mrv.methodology import Methodology, compile_methodology

FUELS = ["electricity", "lpg", "ethanol", "pellets", "biogas", "charcoal", "wood", "kerosene"]
CHECKS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
numbers = st.one_of(
    st.floats(min_value=0.0, max_value=500.0),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, -5.0, 0.5]),
)
fractions = st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0.0, 0.025]))


def _per_stove(
    methodology: Methodology, rows: list[dict[str, Any]], parameters: dict[str, float] | None
) -> list[str]:
    return [repr(methodology._outcome(row, parameters)) for row in rows]


def _batch(
    methodology: Methodology, rows: list[dict[str, Any]], parameters: dict[str, float] | None
) -> list[str]:
    return [repr(found) for found in methodology.evaluate_many(rows, parameters, at_least=1)]


@st.composite
def current_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Inputs of 2.0.0 and 2.1.0: both cases (and one it does not know), every fuel and an
    unknown one, meters recorded or not, samples that meet 90/10 or not, a fleet above or
    below its share."""
    return {
        "case": draw(st.sampled_from([1, 2, 2, 3])),
        "project_fuel": draw(st.sampled_from(FUELS)),
        "baseline_fuel": draw(st.sampled_from(["charcoal", "wood"])),
        "energy_kwh": draw(numbers),
        "fuel_kg": draw(numbers),
        "stove_efficiency": draw(fractions),
        "sc_baseline": draw(st.one_of(st.just(7.5), numbers)),
        "sc_project": draw(st.one_of(st.just(1.2), numbers)),
        "household_size": draw(st.integers(min_value=0, max_value=40)),
        "days": draw(st.integers(min_value=1, max_value=366)),
        "meter_recorded": draw(st.sampled_from([0, 1])),
        "meter_overdue": draw(st.sampled_from([0, 1])),
        "meter_error": draw(fractions),
        "sample_confidence": draw(fractions),
        "sample_precision": draw(fractions),
        "fleet_share": draw(fractions),
    }


@st.composite
def issued_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Inputs of 1.0.0: electric or fuel stoves, the registry's efficiency and household."""
    electric = draw(st.booleans())
    return {
        "energy_kwh": draw(numbers) if electric else 0.0,
        "fuel_kg": 0.0 if electric else draw(numbers),
        "stove_efficiency": draw(fractions),
        "household_size": draw(st.integers(min_value=1, max_value=40)),
        "days": draw(st.integers(min_value=1, max_value=366)),
    }


@CHECKS
@given(
    rows=st.lists(current_inputs(), min_size=1, max_size=40),
    document=st.one_of(
        st.none(),
        st.fixed_dictionaries({"fNRB": st.floats(0.0, 1.0), "EF_grid": st.floats(0.0, 2.0)}),
    ),
)
def test_2_x_over_a_batch_gives_what_cel_gives_stove_by_stove(
    rows: list[dict[str, Any]], document: dict[str, float] | None
) -> None:
    """2.1.0 (the built-in) and 2.0.0 share their formulas; both are checked."""
    for methodology in (
        builtin_methodology(),
        methodology_of(builtin_document("clean-cooking-mecd-2.0.0")),
    ):
        assert methodology._array_nodes() is not None  # every formula of 2.x translates
        assert _batch(methodology, rows, document) == _per_stove(methodology, rows, document)


@CHECKS
@given(rows=st.lists(issued_inputs(), min_size=1, max_size=40))
def test_1_0_0_over_a_batch_gives_what_cel_gives_stove_by_stove(
    rows: list[dict[str, Any]],
) -> None:
    methodology = methodology_of(builtin_document("clean-cooking-mecd-1.0.0"))
    assert methodology._array_nodes() is not None
    assert _batch(methodology, rows, None) == _per_stove(methodology, rows, None)


def test_rows_the_arrays_do_not_settle_fail_or_pass_as_cel_decides() -> None:
    """Missing, mistyped and non-finite inputs, whole numbers given as floats (and the
    reverse), a division by zero and an unknown case: each row as `evaluate` has it."""
    methodology = builtin_methodology()
    good: dict[str, Any] = {
        "case": 1,
        "project_fuel": "electricity",
        "baseline_fuel": "charcoal",
        "energy_kwh": 30.0,
        "fuel_kg": 0.0,
        "stove_efficiency": 0.85,
        "sc_baseline": 0.0,
        "sc_project": 0.0,
        "household_size": 5,
        "days": 30,
        "meter_recorded": 1,
        "meter_overdue": 0,
        "meter_error": 0.01,
        "sample_confidence": 0.9,
        "sample_precision": 0.08,
        "fleet_share": 1.0,
    }
    missing = dict(good)
    del missing["fleet_share"]
    rows = [
        good,
        missing,
        {**good, "energy_kwh": 30},  # a whole number for a double: 30.0
        {**good, "household_size": 5.0},  # a whole float for an int: 5
        {**good, "household_size": 5.5},
        {**good, "household_size": True},
        {**good, "energy_kwh": float("nan")},
        {**good, "energy_kwh": "30"},
        {**good, "project_fuel": "x" * 65},
        {**good, "case": 2, "sc_project": 0.0, "sc_baseline": 7.5},  # 7.5 / 0: infinite
        {**good, "case": 7},
        {**good, "household_size": 2**63},
    ] * 2
    batch = methodology.evaluate_many(rows, at_least=1)
    assert [repr(found) for found in batch] == _per_stove(methodology, rows, None)
    assert sum(isinstance(found, Exception) for found in batch) == 2 * 9
    assert batch[2].inputs["energy_kwh"] == 30.0 and batch[3].inputs["household_size"] == 5


def _single(expression: str, inputs: dict[str, str]) -> Methodology | None:
    problems = Problems()
    return compile_methodology(
        {
            "id": "generated",
            "version": "1.0.0",
            "title": "generated",
            "parameters": {"k": {"value": 0.3, "unit": "x", "source": "test"}},
            "inputs": {n: {"type": t, "unit": "x"} for n, t in inputs.items()},
            "formulas": [{"name": "out", "expression": expression, "unit": "x"}],
            "result": "out",
        },
        problems,
        strict=False,
    )


def test_int_arithmetic_that_overflows_is_left_to_cel() -> None:
    methodology = _single("a * b + a - b + (-a)", {"a": "int", "b": "int"})
    assert methodology is not None and methodology._array_nodes() is not None
    rows = [
        {"a": 3, "b": 4},
        {"a": 2**62, "b": 2},
        {"a": 2**63 - 1, "b": -1},
        {"a": -(2**63), "b": 1},
        {"a": -7, "b": 9},
    ] * 4
    batch = methodology.evaluate_many(rows, at_least=1)
    assert [repr(found) for found in batch] == _per_stove(methodology, rows, None)
    assert "overflow" in str(batch[1])


@pytest.mark.parametrize(
    "expression",
    [
        "double(a / 2)",  # int division: not translated
        "double(a % 2)",
        "double(size('abc')) + x",
        "[1.0, 2.0][0] + x",
        'x + double(int("3"))',
        "s < 'b' ? 1.0 : 2.0",
        "s == 'it\\'s' ? x : k",
        "double(0x10) * x",
        "r'a' == s ? x : k",
    ],
)
def test_a_formula_outside_the_subset_is_evaluated_by_cel(expression: str) -> None:
    methodology = _single(expression, {"a": "int", "x": "double", "s": "string"})
    assert methodology is not None
    assert methodology._array_nodes() is None
    rows = [{"a": n, "x": n / 3, "s": "ab"[n % 2]} for n in range(20)]
    batch = methodology.evaluate_many(rows, at_least=1)
    assert [repr(found) for found in batch] == _per_stove(methodology, rows, None)


def test_the_translation_refuses_what_it_cannot_keep_exact() -> None:
    for expression in ("a.b", "a[0]", "x in [1]", "1u", "has(a.b)", "9223372036854775808"):
        with pytest.raises(Unsupported):
            translate(expression, {"a": "int", "x": "int"})
    assert translate("-x * 2 + 1", {"x": "int"})[1] == "int"
    assert translate("x > 1.0 && !(x == 2.0)", {"x": "double"})[1] == "bool"


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> tuple[str, str]:
    """A random expression of the subset and its type, parenthesized at random: the two
    parsers must agree on precedence where the parentheses are left out."""
    if depth > 4 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["double", "int", "bool"]))
        if kind == "double":
            return draw(st.sampled_from(["x", "y", "k", "0.0", "2.5", "1e-3", ".5"])), kind
        if kind == "int":
            return draw(st.sampled_from(["i", "j", "0", "3", "1000000007"])), kind
        return draw(st.sampled_from(["true", "false", "s == 'a'", "s != 'b'"])), kind
    shape = draw(st.sampled_from(["arith", "compare", "logic", "ternary", "unary", "cast"]))
    left, kind = draw(expressions(depth + 1))
    wrap = (lambda text: f"({text})") if draw(st.booleans()) else (lambda text: text)
    if shape == "cast":
        if kind == "bool":
            return f"!{wrap(left)}", "bool"
        return (f"double({left})", "double") if kind == "int" else (f"int({left})", "int")
    if shape == "unary":
        return (f"!{wrap(left)}", "bool") if kind == "bool" else (f"-{wrap(left)}", kind)
    right, other = draw(expressions(depth + 1))
    assume(kind == other)
    if shape == "ternary":
        test, test_kind = draw(expressions(depth + 1))
        assume(test_kind == "bool")
        return f"{wrap(test)} ? {wrap(left)} : {wrap(right)}", kind
    if shape == "logic" or kind == "bool":
        assume(kind == "bool")
        return f"{wrap(left)} {draw(st.sampled_from(['&&', '||']))} {wrap(right)}", "bool"
    if shape == "compare":
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        return f"{wrap(left)} {op} {wrap(right)}", "bool"
    ops = ["+", "-", "*", "/"] if kind == "double" else ["+", "-", "*"]
    return f"{wrap(left)} {draw(st.sampled_from(ops))} {wrap(right)}", kind


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    generated=expressions(),
    values=st.lists(
        st.tuples(
            st.floats(allow_nan=False, allow_infinity=False, width=64),
            st.floats(min_value=-4.0, max_value=4.0),
            st.integers(min_value=-(2**40), max_value=2**40),
            st.sampled_from([0, 1, -1, 2**62, -(2**63), 2**63 - 1]),
            st.sampled_from(["a", "b", ""]),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_generated_expressions_agree_with_cel(
    generated: tuple[str, str], values: list[tuple[float, float, int, int, str]]
) -> None:
    text, kind = generated
    expression = {"bool": f"({text}) ? 1.0 : 0.0", "int": text, "double": text}[kind]
    inputs = {"x": "double", "y": "double", "i": "int", "j": "int", "s": "string"}
    methodology = _single(expression, inputs)
    assume(methodology is not None)
    assert methodology is not None
    assert methodology._array_nodes() is not None, expression
    rows = [dict(zip(["x", "y", "i", "j", "s"], row, strict=True)) for row in values]
    assert _batch(methodology, rows, None) == _per_stove(methodology, rows, None), expression
