"""Methodologies as data: the built-in clean-cooking methodology against hand-computed worked
examples (docs/methodology.md), and every way a formula is refused or fails to evaluate."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from twinhub.kernel.errors import Problems
from twinhub.mrv.builtin import builtin_document, builtin_methodology
from twinhub.mrv.methodology import (
    MethodologyError,
    MethodologyLimits,
    compile_methodology,
    digest_of,
    to_smallest_unit,
)

ELECTRIC = {
    "energy_kwh": 30.0,
    "fuel_kg": 0.0,
    "stove_efficiency": 0.85,
    "household_size": 5,
    "days": 30,
}


def steps(evaluation: Any) -> dict[str, float]:
    return {step.name: step.value for step in evaluation.steps}


def test_worked_example_electric_cooker() -> None:
    """docs/methodology.md, example 1: 30 kWh in a month, charcoal baseline."""
    result = builtin_methodology().evaluate(ELECTRIC)
    values = steps(result)
    # (165.22 x 0.88 + 44.83) / 0.20 = 190.2236 / 0.20
    assert values["EF_baseline"] == pytest.approx(951.118, abs=1e-9)
    assert values["baseline_kwh"] == 30.0  # under the cap of 1 x 5 x 30 = 150 kWh
    # 30 / 1000 x 0.0036 x 0.85 = 0.0000918 TJ
    assert values["useful_energy_TJ"] == pytest.approx(0.0000918, abs=1e-15)
    assert values["BE"] == pytest.approx(0.0873126324, abs=1e-12)
    assert values["PE"] == pytest.approx(0.01575, abs=1e-12)  # 0.03 x 0.5 x 1.05
    assert values["LE"] == pytest.approx(0.00357813162, abs=1e-12)
    assert result.result == pytest.approx(0.06798450078, abs=1e-12)
    assert result.result_unit == "tCO2e"
    assert result.version == "1.0.0" and result.methodology_id == "clean-cooking-mecd"


def test_worked_example_pellet_stove() -> None:
    """docs/methodology.md, example 2: 20 kg of pellets, household of 4."""
    result = builtin_methodology().evaluate(
        {
            "energy_kwh": 0.0,
            "fuel_kg": 20.0,
            "stove_efficiency": 0.40,
            "household_size": 4,
            "days": 30,
        }
    )
    values = steps(result)
    assert values["fuel_GJ"] == pytest.approx(0.312, abs=1e-12)  # 0.020 t x 15.6 GJ/t
    assert values["baseline_fuel_GJ"] == pytest.approx(0.312, abs=1e-12)  # cap 0.54 GJ
    assert values["BE"] == pytest.approx(0.1186995264, abs=1e-12)
    assert values["PE"] == pytest.approx(0.00295152, abs=1e-12)
    assert values["LE"] == pytest.approx(0.00578740032, abs=1e-12)
    assert result.result == pytest.approx(0.10996060608, abs=1e-12)


def test_worked_example_cap_binds_but_project_emissions_count_everything() -> None:
    """docs/methodology.md, example 3: 200 kWh where the household's cap is 150 kWh."""
    result = builtin_methodology().evaluate({**ELECTRIC, "energy_kwh": 200.0})
    values = steps(result)
    assert values["baseline_kwh"] == 150.0
    assert values["BE"] == pytest.approx(0.436563162, abs=1e-12)
    assert values["PE"] == pytest.approx(0.105, abs=1e-12)  # the raw 200 kWh
    assert result.result == pytest.approx(0.3149850039, abs=1e-12)


def test_a_negative_reduction_counts_as_zero() -> None:
    result = builtin_methodology().evaluate({**ELECTRIC, "stove_efficiency": 0.05})
    values = steps(result)
    assert values["BE"] < values["PE"]
    assert values["LE"] == 0.0
    assert result.result == 0.0


def test_credits_are_rounded_down_to_the_smallest_unit() -> None:
    assert to_smallest_unit(0.06798450078, 6) == 67984
    assert to_smallest_unit(0.1, 1) == 1  # no binary-float loss: 0.1 is one tenth
    assert to_smallest_unit(0.0, 6) == 0
    assert to_smallest_unit(-1.0, 6) == 0
    assert to_smallest_unit(float("inf"), 6) == 0


def test_the_record_carries_the_whole_calculation() -> None:
    methodology = builtin_methodology()
    record = methodology.evaluate(ELECTRIC).as_record()
    assert record["digest"] == methodology.digest == digest_of(builtin_document(methodology.id))
    assert [step["name"] for step in record["steps"]][-1] == "ER"
    assert record["inputs"] == {**ELECTRIC}
    assert all(step["expression"] and step["unit"] for step in record["steps"])


def test_the_digest_names_the_exact_parameters() -> None:
    document = builtin_document("clean-cooking-mecd")
    changed = copy.deepcopy(document)
    changed["parameters"]["fNRB"]["value"] = 0.87
    assert digest_of(document) != digest_of(changed)
    assert digest_of(document) == digest_of(copy.deepcopy(document))


def test_every_builtin_parameter_names_a_unit_and_a_source() -> None:
    methodology = builtin_methodology()
    required = {
        "fNRB",
        "EF_CO2_baseline",
        "NCV_baseline",
        "cap_fuel_GJ_per_person_day",
        "leakage_fraction",
        "max_sessions_per_day",
    }
    assert required <= set(methodology.parameters)
    assert all(p.unit and len(p.source) > 20 for p in methodology.parameters.values())


def small(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "id": "tiny",
        "version": "1.0.0",
        "title": "A tiny methodology",
        "parameters": {"factor": {"value": 2.0, "unit": "x", "source": "a test"}},
        "inputs": {
            "amount": {"type": "double", "unit": "kg"},
            "count": {"type": "int", "unit": "n"},
        },
        "formulas": [{"name": "out", "expression": "amount * factor", "unit": "kg"}],
        "result": "out",
    }
    document.update(changes)
    return document


def refusals(document: Any, limits: MethodologyLimits | None = None) -> dict[str, str]:
    problems = Problems()
    compiled = compile_methodology(document, problems, limits=limits or MethodologyLimits())
    assert compiled is None
    return {item.field: item.error for item in problems.items}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("amount * unknown", "line 1, column 10: undeclared reference to 'unknown'"),
        ("amount + count", "line 1, column 8: found no matching overload for '_+_'"),
        ("amount * (", "line 1, column 11: Syntax error"),
        ("amount > factor", "gives bool, not a number"),
        ("'text'", "gives string, not a number"),
    ],
)
def test_a_formula_that_does_not_check_is_refused_with_where(
    expression: str, expected: str
) -> None:
    found = refusals(small(formulas=[{"name": "out", "expression": expression, "unit": "kg"}]))
    assert expected in found["methodology.formulas[0].expression"]


def test_a_formula_may_only_use_the_formulas_before_it() -> None:
    formulas = [
        {"name": "first", "expression": "second * 2.0", "unit": "kg"},
        {"name": "second", "expression": "amount", "unit": "kg"},
    ]
    found = refusals(small(formulas=formulas, result="second"))
    assert "undeclared reference to 'second'" in found["methodology.formulas[0].expression"]


def test_structural_faults_are_all_reported_at_once() -> None:
    found = refusals(
        small(
            id="Bad Id",
            version="one",
            parameters={
                "factor": {"value": "2", "unit": "x", "source": "s"},
                "other": {"value": 1.0, "unit": "x"},
            },
            inputs={"amount": {"type": "float", "unit": "kg"}},
            formulas=[{"name": "factor", "expression": "1.0", "unit": "x"}],
            result="nothing",
            colour="blue",
        )
    )
    assert set(found) >= {
        "methodology.id",
        "methodology.version",
        "methodology.parameters.factor.value",
        "methodology.parameters.other.source",
        "methodology.inputs.amount.type",
        "methodology.result",
        "methodology.colour",
    }


def test_size_limits_are_enforced() -> None:
    limits = MethodologyLimits(max_expression_chars=20, max_formulas=2)
    long = [{"name": "out", "expression": "amount * factor + amount * factor", "unit": "kg"}]
    assert (
        "longer than 20"
        in refusals(small(formulas=long), limits)["methodology.formulas[0].expression"]
    )
    many = [{"name": f"f{i}", "expression": "amount", "unit": "kg"} for i in range(3)]
    assert (
        "at most 2" in refusals(small(formulas=many, result="f0"), limits)["methodology.formulas"]
    )


def test_deep_nesting_is_refused_or_compiled_never_a_crash() -> None:
    expression = "(" * 600 + "amount" + ")" * 600
    problems = Problems()
    compiled = compile_methodology(
        small(formulas=[{"name": "out", "expression": expression, "unit": "kg"}]), problems
    )
    if compiled is None:
        assert problems.items[0].field == "methodology.formulas[0].expression"
    else:
        assert compiled.evaluate({"amount": 1.5, "count": 1}).result == 1.5


def compiled(expression: str) -> Any:
    problems = Problems()
    methodology = compile_methodology(
        small(formulas=[{"name": "out", "expression": expression, "unit": "kg"}]), problems
    )
    assert methodology is not None, problems.items
    return methodology


@pytest.mark.parametrize(
    ("expression", "inputs", "reason"),
    [
        ("amount / 0.0", {"amount": 1.0, "count": 1}, "not a finite number"),
        ("double(count / 0)", {"amount": 1.0, "count": 1}, "divide by zero"),
        ("double(count * 9223372036854775807)", {"amount": 1.0, "count": 2}, "overflow"),
        ("amount", {"count": 1}, "input 'amount' is missing"),
        ("amount", {"amount": "3", "count": 1}, "must be a number"),
        ("amount", {"amount": True, "count": 1}, "must be a number"),
        ("amount", {"amount": 1.0, "count": 1.5}, "whole number"),
        ("amount", {"amount": float("nan"), "count": 1}, "finite"),
    ],
)
def test_evaluation_failures_name_the_reason(
    expression: str, inputs: dict[str, Any], reason: str
) -> None:
    with pytest.raises(MethodologyError) as failure:
        compiled(expression).evaluate(inputs)
    assert reason in str(failure.value)


def test_an_evaluation_past_the_time_limit_is_refused() -> None:
    problems = Problems()
    document = copy.deepcopy(builtin_document("clean-cooking-mecd"))
    strict = compile_methodology(
        document, problems, limits=MethodologyLimits(max_evaluation_seconds=-1)
    )
    assert strict is not None and not problems.items
    with pytest.raises(MethodologyError, match="time limit"):
        strict.evaluate(ELECTRIC)
    relaxed = compile_methodology(document, Problems())
    assert relaxed is not None and relaxed.evaluate(ELECTRIC).result > 0


def test_whole_number_inputs_may_arrive_as_floats() -> None:
    assert compiled("double(count) * amount").evaluate({"amount": 2.0, "count": 3.0}).result == 6.0
