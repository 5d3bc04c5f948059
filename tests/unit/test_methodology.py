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
    _inline,
    compile_methodology,
    digest_of,
    to_smallest_unit,
)

# Worked example 1 of docs/methodology.md: an electric cooker with a tested efficiency
# (case 1), a charcoal baseline, a calibrated meter within the error threshold, a household
# size confirmed by a sample that met 90/10, and a fleet that reported in full.
ELECTRIC: dict[str, Any] = {
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


def steps(evaluation: Any) -> dict[str, float]:
    return {step.name: step.value for step in evaluation.steps}


def test_worked_example_1_case_1_electric_cooker() -> None:
    """docs/methodology.md, example 1: 30 kWh in a month, charcoal baseline."""
    result = builtin_methodology().evaluate(ELECTRIC)
    values = steps(result)
    assert values["EF_baseline_input"] == pytest.approx(190.2236, abs=1e-9)  # 165.22 x 0.88 + 44.83
    assert values["meter_adjustment"] == 0.0  # 1 % is within the 2.5 % threshold
    assert values["household_discount"] == 0.0  # the sample met 90/10
    assert values["baseline_kwh"] == 30.0  # under the cap of 1 x 5 x 30 = 150 kWh
    assert values["project_energy_TJ"] == pytest.approx(0.000108, abs=1e-15)  # 0.03 MWh x 0.0036
    # 0.000108 x 0.85 / 0.20 = 0.000459 TJ of charcoal displaced
    assert values["displaced_fuel_TJ"] == pytest.approx(0.000459, abs=1e-15)
    assert values["BE"] == pytest.approx(0.0873126324, abs=1e-12)  # 0.000459 x 190.2236
    assert values["PE"] == pytest.approx(0.01575, abs=1e-12)  # 0.03 x 0.5 x 1.05
    assert values["LE"] == pytest.approx(0.00357813162, abs=1e-12)
    assert result.result == pytest.approx(0.06798450078, abs=1e-12)
    assert result.result_unit == "tCO2e"
    assert result.version == "2.1.0" and result.methodology_id == "clean-cooking-mecd"


def test_worked_example_2_case_2_electric_pressure_cooker() -> None:
    """docs/methodology.md, example 2: the same 30 kWh by a pressure cooker whose cooking test
    gives 1.2 MJ per person and event against the charcoal stove's 7.5."""
    result = builtin_methodology().evaluate(
        {**ELECTRIC, "case": 2, "stove_efficiency": 0.0, "sc_baseline": 7.5, "sc_project": 1.2}
    )
    values = steps(result)
    # 0.000108 TJ x 7.5 / 1.2 = 0.000675 TJ of charcoal displaced
    assert values["displaced_fuel_TJ"] == pytest.approx(0.000675, abs=1e-15)
    assert values["BE"] == pytest.approx(0.12840093, abs=1e-12)  # 0.000675 x 190.2236
    assert values["PE"] == pytest.approx(0.01575, abs=1e-12)
    assert values["LE"] == pytest.approx(0.0056325465, abs=1e-12)  # 5 % of 0.11265093
    assert result.result == pytest.approx(0.1070183835, abs=1e-12)


def test_worked_example_3_pellet_stove() -> None:
    """docs/methodology.md, example 3: 20 kg of pellets (renewable: only non-CO2 counts)."""
    result = builtin_methodology().evaluate(
        {
            **ELECTRIC,
            "project_fuel": "pellets",
            "energy_kwh": 0.0,
            "fuel_kg": 20.0,
            "stove_efficiency": 0.40,
            "household_size": 4,
        }
    )
    values = steps(result)
    assert values["fuel_GJ"] == pytest.approx(0.312, abs=1e-12)  # 0.020 t x 15.6 GJ/t
    assert values["baseline_fuel_GJ"] == pytest.approx(0.312, abs=1e-12)  # cap 0.54 GJ
    assert values["EF_project"] == pytest.approx(9.46, abs=1e-12)  # 112 x 0 + 9.46
    assert values["BE"] == pytest.approx(0.1186995264, abs=1e-12)  # 0.000624 TJ x 190.2236
    assert values["PE"] == pytest.approx(0.00295152, abs=1e-12)  # 0.000312 TJ x 9.46
    assert values["LE"] == pytest.approx(0.00578740032, abs=1e-12)
    assert result.result == pytest.approx(0.10996060608, abs=1e-12)


def test_worked_example_4_charcoal_stove_counts_its_own_charcoal() -> None:
    """docs/methodology.md, example 4: an improved charcoal stove (tested efficiency 0.35)
    burning 20 kg of charcoal: its project emissions are charcoal's, fNRB included."""
    result = builtin_methodology().evaluate(
        {
            **ELECTRIC,
            "project_fuel": "charcoal",
            "energy_kwh": 0.0,
            "fuel_kg": 20.0,
            "stove_efficiency": 0.35,
        }
    )
    values = steps(result)
    assert values["fuel_GJ"] == pytest.approx(0.59, abs=1e-12)  # 0.020 t x 29.5 GJ/t
    assert values["baseline_fuel_GJ"] == pytest.approx(0.59, abs=1e-12)  # cap 0.675 GJ
    assert values["EF_project"] == pytest.approx(190.2236, abs=1e-9)  # charcoal's own factor
    # 0.00059 TJ x 0.35 / 0.20 = 0.0010325 TJ displaced, x 190.2236
    assert values["BE"] == pytest.approx(0.196405867, abs=1e-12)
    assert values["PE"] == pytest.approx(0.112231924, abs=1e-12)  # 0.00059 TJ x 190.2236
    assert result.result == pytest.approx(0.07996524585, abs=1e-12)  # 0.084173943 x 0.95


def test_worked_example_5_lpg_stove() -> None:
    """docs/methodology.md, example 5: 10 kg of LPG in a stove of tested efficiency 0.55."""
    result = builtin_methodology().evaluate(
        {
            **ELECTRIC,
            "project_fuel": "lpg",
            "energy_kwh": 0.0,
            "fuel_kg": 10.0,
            "stove_efficiency": 0.55,
        }
    )
    values = steps(result)
    assert values["fuel_GJ"] == pytest.approx(0.473, abs=1e-12)  # 0.010 t x 47.3 GJ/t
    assert values["EF_project"] == pytest.approx(63.2665, abs=1e-12)  # 63.1 + 0.1665
    assert values["BE"] == pytest.approx(0.2474333477, abs=1e-12)  # 0.00130075 TJ x 190.2236
    assert values["PE"] == pytest.approx(0.0299250545, abs=1e-12)  # 0.000473 TJ x 63.2665
    assert result.result == pytest.approx(0.2066328785, abs=1e-10)


def test_wood_baseline_uses_wood_factors() -> None:
    values = steps(builtin_methodology().evaluate({**ELECTRIC, "baseline_fuel": "wood"}))
    assert values["EF_baseline_input"] == pytest.approx(108.02, abs=1e-9)  # 112 x 0.88 + 9.46
    assert values["eta_baseline"] == 0.10
    # 0.000108 x 0.85 / 0.10 = 0.000918 TJ of wood, x 108.02
    assert values["BE"] == pytest.approx(0.09916236, abs=1e-12)


def test_a_project_document_sets_fnrb_and_the_grid_factor() -> None:
    result = builtin_methodology().evaluate(ELECTRIC, {"fNRB": 0.5, "EF_grid": 0.87})
    values = steps(result)
    assert values["EF_baseline_input"] == pytest.approx(127.44, abs=1e-9)  # 82.61 + 44.83
    assert values["PE"] == pytest.approx(0.0274050, abs=1e-12)  # 0.03 x 0.87 x 1.05


def test_meter_accuracy_adjusts_both_sides() -> None:
    """docs/methodology.md, example 6: a meter rated +/-4 % (worse than 2.5 %): the baseline
    counts 4 % less, the project emissions 4 % more."""
    values = steps(builtin_methodology().evaluate({**ELECTRIC, "meter_error": 0.04}))
    assert values["meter_adjustment"] == 0.04
    assert values["baseline_kwh"] == pytest.approx(28.8, abs=1e-12)
    assert values["BE"] == pytest.approx(0.083820127, abs=1e-9)  # 0.00044064 TJ x 190.2236
    assert values["PE"] == pytest.approx(0.01638, abs=1e-12)  # 0.0312 x 0.5 x 1.05
    assert values["ER"] == pytest.approx(0.0640681207, abs=1e-9)
    unrecorded = steps(builtin_methodology().evaluate({**ELECTRIC, "meter_recorded": 0}))
    assert unrecorded["meter_adjustment"] == 0.05  # no record: the methodology's +/-5 %
    overdue = steps(builtin_methodology().evaluate({**ELECTRIC, "meter_overdue": 1}))
    assert overdue["meter_error_used"] == 0.05 and overdue["meter_adjustment"] == 0.05


def test_a_sample_that_misses_90_10_lowers_the_household_cap() -> None:
    """docs/methodology.md, example 7: 200 kWh; the household-size sample reached only 15 %
    precision, so the cap counts 5 x 0.85 persons: 127.5 kWh instead of 150."""
    result = builtin_methodology().evaluate(
        {**ELECTRIC, "energy_kwh": 200.0, "sample_precision": 0.15}
    )
    values = steps(result)
    assert values["household_discount"] == 0.15
    assert values["baseline_kwh"] == pytest.approx(127.5, abs=1e-12)
    assert values["BE"] == pytest.approx(0.3710786877, abs=1e-12)  # 0.00195075 TJ x 190.2236
    assert values["PE"] == pytest.approx(0.105, abs=1e-12)  # the raw 200 kWh
    assert result.result == pytest.approx(0.2527747533, abs=1e-9)
    unsampled = steps(
        builtin_methodology().evaluate(
            {**ELECTRIC, "sample_confidence": 0.0, "sample_precision": 0.0}
        )
    )
    assert unsampled["household_discount"] == 0.1  # not sampled: the required 10 %


def test_the_cap_binds_but_project_emissions_count_everything() -> None:
    result = builtin_methodology().evaluate({**ELECTRIC, "energy_kwh": 200.0})
    values = steps(result)
    assert values["baseline_kwh"] == 150.0
    assert values["BE"] == pytest.approx(0.436563162, abs=1e-12)
    assert values["PE"] == pytest.approx(0.105, abs=1e-12)  # the raw 200 kWh
    assert result.result == pytest.approx(0.3149850039, abs=1e-12)


def test_a_fleet_below_its_reporting_share_scales_every_stove() -> None:
    full = builtin_methodology().evaluate(ELECTRIC).result
    short = builtin_methodology().evaluate({**ELECTRIC, "fleet_share": 0.8})
    assert steps(short)["fleet_factor"] == 0.8
    assert short.result == pytest.approx(full * 0.8, abs=1e-15)


@pytest.mark.parametrize("change", [{"case": 3}, {"project_fuel": "coal", "fuel_kg": 1.0}])
def test_an_unknown_case_or_fuel_fails_the_evaluation(change: dict[str, Any]) -> None:
    with pytest.raises(MethodologyError, match="BE"):
        builtin_methodology().evaluate({**ELECTRIC, **change})


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
        "EF_CO2_charcoal",
        "EF_CO2_wood",
        "NCV_lpg",
        "cap_fuel_GJ_per_person_day",
        "leakage_fraction",
        "meter_error_threshold",
    }
    assert required <= set(methodology.parameters)
    assert "NCV_baseline" not in methodology.parameters  # used by no formula: removed
    assert {"max_sessions_per_day", "max_missing_share"} <= set(methodology.rules)
    everything = [*methodology.parameters.values(), *methodology.rules.values()]
    assert all(p.unit and len(p.source) > 20 for p in everything)
    # The charcoal factors name where their values come from, and that it is not IPCC's.
    assert "NOT the IPCC" in methodology.parameters["EF_CO2_charcoal"].source


def test_an_unused_parameter_is_refused_with_its_path() -> None:
    document = small(
        parameters={**small()["parameters"], "spare": {"value": 1.0, "unit": "x", "source": "s"}}
    )
    found = refusals(document)
    assert found == {
        "methodology.parameters.spare": (
            "no formula uses this parameter: use it in a formula or remove it"
        )
    }
    threshold = small(
        parameters={
            **small()["parameters"],
            "min_active_days": {"value": 1, "unit": "days", "source": "s"},
        }
    )
    assert "belongs in rules" in refusals(threshold)["methodology.parameters.min_active_days"]
    # A document stored before the rule still computes.
    assert compile_methodology(document, Problems(), strict=False) is not None


def test_rules_are_only_the_platforms_own_in_their_units() -> None:
    found = refusals(
        small(
            rules={
                "min_active_days": {"value": 3, "unit": "weeks", "source": "s"},
                "colour": {"value": 1, "unit": "x", "source": "s"},
            }
        )
    )
    assert found["methodology.rules.min_active_days.unit"] == "expected days"
    assert "not a rule the platform applies" in found["methodology.rules.colour"]
    ok = compile_methodology(
        small(rules={"min_active_days": {"value": 3, "unit": "days", "source": "s"}}), Problems()
    )
    assert ok is not None and ok.rule_values() == {"min_active_days": 3.0}


def test_a_string_input_is_compared_by_formulas() -> None:
    document = small(
        inputs={**small()["inputs"], "fuel": {"type": "string", "unit": "fuel"}},
        formulas=[
            {"name": "out", "expression": 'fuel == "wood" ? amount * factor : 0.0', "unit": "kg"}
        ],
    )
    problems = Problems()
    methodology = compile_methodology(document, problems)
    assert methodology is not None, problems.items
    assert methodology.evaluate({"amount": 2.0, "count": 1, "fuel": "wood"}).result == 4.0
    with pytest.raises(MethodologyError, match="text"):
        methodology.evaluate({"amount": 2.0, "count": 1, "fuel": 3})


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
        small(formulas=[{"name": "out", "expression": expression, "unit": "kg"}]),
        problems,
        strict=False,
    )
    if compiled is None:
        assert problems.items[0].field == "methodology.formulas[0].expression"
    else:
        assert compiled.evaluate({"amount": 1.5, "count": 1}).result == 1.5


def compiled(expression: str) -> Any:
    """A one-formula methodology (not strict: these formulas need not read `factor`)."""
    problems = Problems()
    methodology = compile_methodology(
        small(formulas=[{"name": "out", "expression": expression, "unit": "kg"}]),
        problems,
        strict=False,
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


def test_parameters_are_written_in_as_constants_only_where_they_are_names() -> None:
    values = {"fNRB": 0.88, "e5": 2.0, "wood": 3.0, "tiny": 1e-05}
    assert (
        _inline('fuel == "wood" ? fNRB * 1e5 + x.fNRB + e5 : tiny', values)
        == 'fuel == "wood" ? (0.88) * 1e5 + x.fNRB + (2.0) : (1e-05)'
    )
    # The bound formulas give the very same doubles as the parameters handed to CEL.
    methodology = builtin_methodology()
    bound = methodology.evaluate(ELECTRIC, {"fNRB": 0.613, "EF_grid": 0.0723})
    values = {**methodology.parameter_values(), "fNRB": 0.613, "EF_grid": 0.0723}
    programs, uses, constants = methodology._programs, methodology._uses, values
    data: dict[str, Any] = {**constants, **bound.inputs}
    for formula, program, names in zip(methodology.formulas, programs, uses, strict=True):
        data[formula.name] = program.eval(data={n: data[n] for n in names}).value()
        assert data[formula.name] == steps(bound)[formula.name], formula.name


def test_remembered_formula_values_never_cross_a_documents_figures() -> None:
    methodology = builtin_methodology()
    first = methodology.evaluate(ELECTRIC).result
    lower = methodology.evaluate(ELECTRIC, {"fNRB": 0.5}).result
    assert lower < first
    assert methodology.evaluate(ELECTRIC).result == first
    assert methodology.evaluate(ELECTRIC, {"fNRB": 0.5}).result == lower
    assert methodology.evaluate({**ELECTRIC, "energy_kwh": 60.0}).result == pytest.approx(
        2 * first, abs=1e-15
    )


def test_only_formulas_whose_values_repeat_are_remembered() -> None:
    problems = Problems()
    methodology = compile_methodology(builtin_document("clean-cooking-mecd"), problems)
    assert methodology is not None
    for n in range(150):
        methodology.evaluate({**ELECTRIC, "energy_kwh": 10.0 + n})
    names = [f.name for f in methodology.formulas]
    unshared = {names[index] for _, index in methodology._unshared}
    assert {"ER", "BE", "PE", "baseline_kwh"} <= unshared
    assert not {"EF_baseline_input", "meter_adjustment", "fleet_factor"} & unshared


HUNDRED = "[" + ",".join(["1"] * 100) + "]"
# Ten thousand iterations: past CEL's iteration budget whatever the inputs (a methodology's
# inputs are scalars, so no comprehension's length depends on them).
OVER_BUDGET = f"double({HUNDRED}.map(a, {HUNDRED}.map(b, 1)).size()) * amount"


def test_a_formula_past_the_iteration_budget_is_refused_with_its_path() -> None:
    """Issue 31 §3: accepted at registration, it failed every evaluation afterwards."""
    formulas = [
        {"name": "fine", "expression": "amount * factor", "unit": "kg"},
        {"name": "out", "expression": OVER_BUDGET, "unit": "kg"},
    ]
    found = refusals(small(formulas=formulas))
    assert "iteration budget" in found["methodology.formulas[1].expression"]
    assert "methodology.formulas[0].expression" not in found
    # A comprehension within the budget is a formula like any other.
    within = "double([1, 2, 3].map(a, a * 2).size()) * amount * factor"
    assert compiled(within).evaluate({"amount": 2.0, "count": 1}).result == 12.0


def test_a_stored_formula_past_the_budget_fails_its_evaluation_with_the_reason() -> None:
    """A document stored before the rule (compiled leniently) still loads; evaluating it is
    a MethodologyError naming the formula (a flagged claim, a 422), never a crash."""
    problems = Problems()
    formulas = [{"name": "out", "expression": OVER_BUDGET, "unit": "kg"}]
    stored = compile_methodology(small(formulas=formulas), problems, strict=False)
    assert stored is not None, problems.items
    with pytest.raises(MethodologyError) as failure:
        stored.evaluate({"amount": 1.0, "count": 1})
    assert failure.value.formula == "out"
    assert "iteration budget" in failure.value.reason
