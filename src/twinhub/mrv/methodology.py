"""Methodologies as data: named parameters with their sources, declared inputs, and formulas
in CEL (Common Expression Language, Google's type-checked implementation).

A credit must be recomputable by an auditor from three things: the methodology's parameters,
the measured inputs and the formulas. Keeping the formulas as CEL text inside the protocol,
rather than as Python, means the protocol is the whole method; CEL is side-effect free, not
Turing complete, and type-checked at compile time, so a formula that names an unknown
variable, mixes types or does not parse is refused when the protocol is registered, with the
line and column of the fault. Nothing here touches the database: a worked example is a test.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import orjson
from cel_expr_python import cel

from twinhub.kernel.errors import Problems
from twinhub.mrv import formula_arrays
from twinhub.mrv.meter import REGISTER_RATE, Reading

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
VERSION = re.compile(r"^\d{1,4}\.\d{1,4}\.\d{1,4}$")
INPUT_TYPES: dict[str, cel.Type] = {
    "double": cel.Type.DOUBLE,
    "int": cel.Type.INT,
    "string": cel.Type.STRING,  # a choice such as the project fuel: formulas compare it
}
MAX_INPUT_STRING = 64
MEMO_SIZE = 50_000  # formula values remembered per methodology (mrv.methodology._run)
# Below this many rows a batch is evaluated stove by stove: numpy's cost per operation is
# fixed, and for a claim's one stove CEL's own evaluation is the cheaper.
ARRAY_MIN_ROWS = 16
# Thresholds the platform's own rules apply (mrv.periods), declared in a methodology's
# `rules` section with value, unit and source: a formula never reads them, so they are kept
# apart from `parameters`, every one of which some formula must use.
RULES = {
    "min_active_days": "days",
    "max_sessions_per_day": "sessions/day",
    "max_kwh_per_session": "kWh/session",
    "max_fuel_kg_per_session": "kg/session",
    "corroboration_tolerance": "fraction",
    "max_missing_share": "fraction",
    # 2.1.0 on: the register's plausible rise a day, which decides a rollover from a fault
    # (mrv.meter.register_rise); undeclared (2.0.0), any fall with registerMax is a rollover.
    "max_register_kwh_per_day": "kWh/day",
    "creditLateData": "flag",  # 1: a later period may credit readings that came late
}
# The one rule whose value is a choice, not a number: what quantity a stove is credited with.
# "meter": the meter register's rise (2.0.0 on), corroborated by the sessions; "sessions":
# the sum of the per-session figures the device reports (how 1.0.0 was issued).
MEASURE, MEASURES, MEASURE_UNIT = "measure", ("sessions", "meter"), "measure"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CEL_ERROR = re.compile(r"<input>:(\d+):(\d+): (.*?)(?:\n|$)")
_STATUS_WORDS = re.compile(r"^[A-Z_]+: |\s*\[[A-Z_]+\]$")  # "CANCELLED: ... [CANCELLED]"


@dataclass(frozen=True)
class MethodologyLimits:
    """Bounds that keep a hostile or careless methodology cheap to check and to run. CEL has
    no loops over scalar inputs, so an expression's cost is bounded by its length; the time
    limit is a backstop measured around each evaluation, in this thread's CPU time: a busy
    machine or a descheduled thread must not fail a sound methodology (the built-in one
    costs about 0.3 ms)."""

    max_parameters: int = 128
    max_inputs: int = 32
    max_formulas: int = 64
    max_expression_chars: int = 2000
    max_text_chars: int = 1000
    max_evaluation_seconds: float = 0.5


DEFAULT_LIMITS = MethodologyLimits()


@dataclass(frozen=True)
class Parameter:
    name: str
    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class Input:
    name: str
    type: str
    unit: str
    description: str


@dataclass(frozen=True)
class Formula:
    name: str
    expression: str
    unit: str
    description: str


class MethodologyError(Exception):
    """A formula could not produce a usable number for these inputs (division by zero,
    overflow, a missing or mistyped input). The oracle flags the claim with this reason; it
    never approves by default."""

    def __init__(self, reason: str, formula: str | None = None) -> None:
        super().__init__(f"{formula}: {reason}" if formula else reason)
        self.reason = reason
        self.formula = formula


class Step(NamedTuple):
    """One formula's value in an evaluation (a tuple: a period makes one per formula and
    stove, and a frozen dataclass costs several times as much to make)."""

    name: str
    expression: str
    value: float
    unit: str


class Outcome(NamedTuple):
    """One stove's evaluation in a batch (`Methodology.evaluate_many`): what an Evaluation
    says of it, without a Step per formula (a 10,000-stove period would make 180,000)."""

    inputs: dict[str, float | int | str]
    values: dict[str, float]  # each formula's value, by name, in the formulas' order
    result: float


@dataclass(frozen=True)
class Evaluation:
    """One application of a methodology: every intermediate value, so a credential can carry
    the whole calculation and an auditor can follow it line by line."""

    methodology_id: str
    version: str
    digest: str
    inputs: dict[str, float | int | str]
    steps: list[Step]
    result: float
    result_unit: str

    def as_record(self) -> dict[str, Any]:
        return {
            "methodology": self.methodology_id,
            "version": self.version,
            "digest": self.digest,
            "inputs": self.inputs,
            "steps": [
                {"name": s.name, "expression": s.expression, "value": s.value, "unit": s.unit}
                for s in self.steps
            ],
            "result": self.result,
            "resultUnit": self.result_unit,
        }


@dataclass(frozen=True)
class Methodology:
    id: str
    version: str
    title: str
    reference: str
    parameters: dict[str, Parameter]
    inputs: dict[str, Input]
    formulas: list[Formula]
    result: str
    document: dict[str, Any] = field(repr=False)
    rules: dict[str, Parameter] = field(default_factory=dict)
    digest: str = ""
    # rules.measure; undeclared: "sessions" for a document with no rules section (the form
    # of 1.0.0, which credited the sessions' sum), "meter" for one with it (2.0.0)
    measure: str = "meter"
    _programs: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    # Per formula, the names it can refer to: each evaluation hands CEL only those (CEL
    # converts every variable it is given, and a formula reads a handful of thirty).
    _uses: tuple[tuple[str, ...], ...] = field(default=(), repr=False, compare=False)
    limits: MethodologyLimits = field(default=DEFAULT_LIMITS, repr=False, compare=False)
    # The formulas compiled with the parameters' values written in as constants, per set of
    # a document's figures: an evaluation then hands CEL only the inputs and the formulas
    # before, about half the variables (the benchmark's 10,000-stove period).
    _bound: dict[tuple[tuple[str, float], ...], Any] = field(  # by the document's figures
        default_factory=dict, repr=False, compare=False
    )
    _memo: dict[tuple[Any, ...], float | int] = field(
        default_factory=dict, repr=False, compare=False
    )
    _tally: dict[tuple[Any, ...], list[int]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _unshared: set[tuple[Any, ...]] = field(default_factory=set, repr=False, compare=False)
    _judged: set[tuple[Any, ...]] = field(default_factory=set, repr=False, compare=False)
    # The formulas as array operations (mrv.formula_arrays), translated on first use; None
    # under "nodes" when one is outside the translated subset.
    _arrays: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def result_unit(self) -> str:
        return next(f.unit for f in self.formulas if f.name == self.result)

    def parameter_values(self) -> dict[str, float]:
        return {name: p.value for name, p in self.parameters.items()}

    @property
    def reading(self) -> Reading:
        """How this methodology reads the telemetry into a stove's days (mrv.rollups): its
        measure and, from 2.1.0, the register's plausible rise a day."""
        rate = self.rules.get(REGISTER_RATE)
        return Reading(self.measure, None if rate is None else rate.value)

    def rule_values(self) -> dict[str, float]:
        """The thresholds the platform's rules apply: the `rules` section, or (a document
        written before rules had their own section) the same names among its parameters."""
        if self.rules:
            return {name: p.value for name, p in self.rules.items()}
        return {name: p.value for name, p in self.parameters.items() if name in RULES}

    def evaluate(
        self, inputs: Mapping[str, Any], parameters: Mapping[str, float] | None = None
    ) -> Evaluation:
        """Apply the formulas in order to `inputs`, with `parameters` (a project document's
        figures, by name) in place of the methodology's defaults; raise MethodologyError on
        any value that is missing, of the wrong type, or not a finite number."""
        key = tuple(sorted(parameters.items())) if parameters else ()
        programs, references, constants = self._programs_for(key, parameters)
        data: dict[str, Any] = dict(constants)
        used: dict[str, float | int | str] = {}
        for name, declared in self.inputs.items():
            if name not in inputs:
                raise MethodologyError(f"input {name!r} is missing")
            used[name] = data[name] = _coerce_input(name, declared.type, inputs[name])
        # The limit is on this thread's CPU time, but reading that clock is a system call
        # (tens of microseconds on a busy VM, a third of an evaluation): the wall clock is
        # read instead, and only an evaluation whose wall time passed the limit (CPU time
        # never exceeds it) is run again under the CPU clock to decide.
        started = time.perf_counter()
        steps = self._run(key, programs, references, dict(data))
        if time.perf_counter() - started > self.limits.max_evaluation_seconds:
            cpu = time.thread_time()
            steps = self._run(key, programs, references, data)
            if time.thread_time() - cpu > self.limits.max_evaluation_seconds:
                raise MethodologyError("evaluation took longer than the methodology time limit")
        data.update((step.name, step.value) for step in steps)
        result = float(data[self.result])
        return Evaluation(self.id, self.version, self.digest, used, steps, result, self.result_unit)

    def evaluate_many(
        self,
        rows: Sequence[Mapping[str, Any]],
        parameters: Mapping[str, float] | None = None,
        at_least: int = ARRAY_MIN_ROWS,
    ) -> list[Outcome | MethodologyError]:
        """`evaluate` over a batch of stoves: each row's outcome, or the MethodologyError
        `evaluate` raises for it, with the same figures to the last bit. The formulas run
        once for the whole batch as array operations (mrv.formula_arrays) when every one
        translates and the batch has `at_least` rows; a row the arrays do not settle (an
        input of the wrong type, a CEL error, a value that is not a finite number) and every
        row otherwise is evaluated by CEL, stove by stove. The arrays need no time limit:
        their cost is a few operations per row and node, bounded by the formulas' length."""
        nodes = self._array_nodes()
        count = len(rows)
        if nodes is None or count < at_least or count == 0:
            return [self._outcome(row, parameters) for row in rows]
        names = list(self.inputs)
        given = _input_rows(names, rows)
        unsettled = np.zeros(count, dtype=bool)
        env: dict[str, np.ndarray] = {}
        used: list[Sequence[Any]] = []
        changed = given is None
        columns = zip(*given, strict=True) if given else (None for _ in names)
        for (name, declared), column in zip(self.inputs.items(), columns, strict=True):
            if column is None:
                column = [row.get(name, _MISSING) for row in rows]
            array, values, bad = _input_column(name, declared.type, column)
            env[name], unsettled = array, unsettled | bad
            used.append(values)
            changed = changed or values is not column
        values_of = self.parameter_values()
        if parameters:
            values_of.update({n: float(v) for n, v in parameters.items() if n in values_of})
        for name, value in values_of.items():
            env[name] = np.full(count, value, dtype=np.float64)
        for formula, (node, kind) in zip(self.formulas, nodes, strict=True):
            found, errors = formula_arrays.run(node, env, count)
            if kind == "double":
                with np.errstate(all="ignore"):
                    errors = errors | ~np.isfinite(found)
            env[formula.name], unsettled = found, unsettled | errors
        steps = [f.name for f in self.formulas]
        # Columns zipped, not a 2-D array's rows: zip hands out one tuple again and again,
        # where .tolist() would make a list a row for the collector to walk.
        columns = [env[name].astype(np.float64).tolist() for name in steps]
        results = columns[steps.index(self.result)]
        figures = zip(*columns, strict=True)
        if changed:
            given = list(zip(*used, strict=True)) if used else [()] * count
        assert given is not None
        # Every row's dicts and outcome made by map over C callables: no bytecode a row.
        inputs = map(dict, map(zip, repeat(names), given))
        values = map(dict, map(zip, repeat(steps), figures))
        outcomes: list[Outcome | MethodologyError] = list(
            map(tuple.__new__, repeat(Outcome), zip(inputs, values, results, strict=True))
        )
        for index in np.flatnonzero(unsettled).tolist():
            outcomes[index] = self._outcome(rows[index], parameters)
        return outcomes

    def _outcome(
        self, row: Mapping[str, Any], parameters: Mapping[str, float] | None
    ) -> Outcome | MethodologyError:
        try:
            evaluation = self.evaluate(row, parameters)
        except MethodologyError as error:
            return error
        values = {step.name: step.value for step in evaluation.steps}
        return Outcome(evaluation.inputs, values, evaluation.result)

    def _array_nodes(self) -> list[tuple[Any, str]] | None:
        """Each formula translated to array operations, or None (cached either way)."""
        if "nodes" in self._arrays:
            return self._arrays["nodes"]  # type: ignore[no-any-return]
        nodes: list[tuple[Any, str]] | None = []
        types = {name: "double" for name in self.parameters}
        types |= {name: spec.type for name, spec in self.inputs.items()}
        if len(self._programs) != len(self.formulas):
            nodes = None
        else:
            for formula, program in zip(self.formulas, self._programs, strict=True):
                try:
                    node = formula_arrays.translate(formula.expression, types)
                except formula_arrays.Unsupported:
                    nodes = None
                    break
                kind = "int" if program.return_type() == cel.Type.INT else "double"
                if node[1] != kind:  # the translation disagrees with CEL's checker
                    nodes = None
                    break
                nodes.append(node)
                types[formula.name] = kind
        self._arrays["nodes"] = nodes
        return nodes

    def _run(
        self,
        bound: tuple[tuple[str, float], ...],
        programs: tuple[Any, ...],
        references: tuple[tuple[str, ...], ...],
        data: dict[str, Any],
    ) -> list[Step]:
        """Each formula in order on `data` (which gains their values)."""
        steps: list[Step] = []
        isfinite = math.isfinite
        memo, unshared, judged = self._memo, self._unshared, self._judged
        if len(memo) > MEMO_SIZE:
            memo.clear()
        for index, (formula, program, uses) in enumerate(
            zip(self.formulas, programs, references, strict=True)
        ):
            # A formula is a pure function of the names it reads: across a fleet most of
            # them (the baseline's factor, the fuel's, the meter's and the sample's rules)
            # see the same values stove after stove, so their value is remembered.
            # (A formula whose values rarely repeat, such as the reductions themselves, stops
            # being remembered after its first hundred: `_unshared` names it.)
            # A zero is keyed by its repr: -0.0 == 0.0, but a formula may keep the sign
            # (-0.0 * 0.95 is -0.0), and a remembered 0.0 must not stand in for CEL's -0.0.
            which = (bound, index)
            remembered = which not in unshared
            key = (
                (bound, index, *[v if (v := data[name]) else repr(v) for name in uses])
                if remembered
                else None
            )
            value = memo.get(key) if remembered else None
            if value is None:
                try:
                    outcome = program.eval(data={name: data[name] for name in uses})
                except RuntimeError as error:  # CEL's own limits (its iteration budget)
                    raise MethodologyError(_limit_reason(error), formula.name) from None
                value = outcome.value()
                if type(value) is not float or not isfinite(value):  # else the common case
                    value = _checked(outcome, value, formula.name)
                if remembered:
                    memo[key] = value
                    if which not in judged:
                        self._learn(which, hit=False)
            elif which not in judged:
                self._learn(which, hit=True)
            data[formula.name] = value
            steps.append(Step(formula.name, formula.expression, float(value), formula.unit))
        return steps

    def _learn(self, which: tuple[Any, ...], hit: bool) -> None:
        """Count a remembered formula's hits over its first hundred lookups (for one set of
        figures); one that missed more than half is not remembered any more."""
        tally = self._tally.setdefault(which, [0, 0])
        tally[0 if hit else 1] += 1
        if tally[0] + tally[1] >= 100:
            self._judged.add(which)
            if tally[1] > 50:
                self._unshared.add(which)

    def _programs_for(
        self, key: tuple[tuple[str, float], ...], parameters: Mapping[str, float] | None
    ) -> tuple[tuple[Any, ...], tuple[tuple[str, ...], ...], Mapping[str, float]]:
        """The formulas with the parameters' values (the defaults, or a document's) written
        in, compiled once per set of values; the names each still reads; and the parameter
        values an evaluation must still hand CEL (none, unless binding failed)."""
        found = self._bound.get(key)
        if found is None:
            values = self.parameter_values()
            if parameters:
                values.update({n: float(v) for n, v in parameters.items() if n in values})
            found = _bind(self, values)
            if len(self._bound) >= 64:
                self._bound.clear()
            self._bound[key] = found
        return found


_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")


def _inline(expression: str, values: Mapping[str, float]) -> str:
    """`expression` with each parameter name (outside string literals) replaced by its
    value as a CEL double literal; repr gives the digits that read back as the same double."""
    out, last = [], 0
    for literal in _STRING.finditer(expression):
        out.append(_inline_code(expression[last : literal.start()], values))
        out.append(literal.group())
        last = literal.end()
    out.append(_inline_code(expression[last:], values))
    return "".join(out)


def _inline_code(code: str, values: Mapping[str, float]) -> str:
    def constant(match: re.Match[str]) -> str:
        word, at = match.group(), match.start()
        if word not in values or (at and (code[at - 1].isalnum() or code[at - 1] in "._")):
            return word  # not a parameter, a field after a dot, or the tail of 1e5
        return f"({float(values[word])!r})"

    return _IDENTIFIER.sub(constant, code)


def _bind(
    methodology: Methodology, values: Mapping[str, float]
) -> tuple[tuple[Any, ...], tuple[tuple[str, ...], ...], Mapping[str, float]]:
    variables = {name: INPUT_TYPES[spec.type] for name, spec in methodology.inputs.items()}
    programs = []
    for formula, original in zip(methodology.formulas, methodology._programs, strict=True):
        program = _compile(_inline(formula.expression, values), dict(variables))
        if isinstance(program, str):  # not expected of a checked formula: keep the original
            return methodology._programs, methodology._uses, dict(values)
        programs.append(program)
        variables[formula.name] = original.return_type()
    return tuple(programs), _references(methodology.formulas, {}, methodology.inputs), {}


def _checked(outcome: Any, value: Any, formula: str) -> float | int:
    """A formula's value that is not a finite double: a whole number passes, anything else
    (a CEL error, a non-number, an infinity or NaN) fails with the reason."""
    if outcome.type() == cel.Type.ERROR:
        raise MethodologyError(_runtime_reason(str(value)), formula)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MethodologyError("did not give a number", formula)
    if isinstance(value, float):
        raise MethodologyError(
            "is not a finite number (a division by zero or an overflow)", formula
        )
    return value


def _references(
    formulas: list[Formula], parameters: dict[str, Any], inputs: dict[str, Any]
) -> tuple[tuple[str, ...], ...]:
    """For each formula, the parameters, inputs and earlier formulas whose names occur in
    its expression as identifiers: a superset of what it reads (a name inside a string
    literal or after a dot is passed needlessly, never missed)."""
    known = set(parameters) | set(inputs)
    found = []
    for formula in formulas:
        words = set(_IDENTIFIER.findall(formula.expression))
        found.append(tuple(sorted(words & known)))
        known.add(formula.name)
    return tuple(found)


_MISSING = object()
_PLACEHOLDER: dict[str, Any] = {"double": 0.0, "int": 0, "string": ""}


def _input_rows(
    names: list[str], rows: Sequence[Mapping[str, Any]]
) -> list[tuple[Any, ...]] | None:
    """Each row's inputs in the declared order (one C call a row), or None when a row lacks
    one (each column is then read with a default, and the row left to `evaluate`)."""
    if not names:
        return [()] * len(rows)
    pick = itemgetter(*names)
    try:
        found = list(map(pick, rows))
    except (KeyError, TypeError):
        return None
    return found if len(names) > 1 else [(value,) for value in found]


def _input_column(
    name: str, type_name: str, column: Sequence[Any]
) -> tuple[np.ndarray, Sequence[Any], np.ndarray]:
    """One input over a batch: its array, its values as `_coerce_input` makes them (the
    column itself when it needs no change), and the rows where it is missing or refused
    (left to `evaluate`, which names the fault). The common case, every value already of
    its type, is checked over the column at once."""
    kinds = set(map(type, column))
    count = len(column)
    if type_name == "double" and kinds <= {float}:
        array = np.array(column, dtype=np.float64)
        return array, column, ~np.isfinite(array)
    if type_name == "int" and kinds <= {int}:
        try:
            return np.array(column, dtype=np.int64), column, np.zeros(count, dtype=bool)
        except OverflowError:
            pass  # one is out of int64's range: found row by row below
    if type_name == "string" and kinds <= {str} and max(map(len, column)) <= MAX_INPUT_STRING:
        array = np.empty(count, dtype=object)
        array[:] = column
        return array, column, np.zeros(count, dtype=bool)
    values: list[Any] = []
    bad = np.zeros(count, dtype=bool)
    for index, value in enumerate(column):
        try:
            if value is _MISSING:
                raise MethodologyError(f"input {name!r} is missing")
            values.append(_coerce_input(name, type_name, value))
        except Exception:  # evaluate raises it again for this row, as it would
            values.append(_PLACEHOLDER[type_name])
            bad[index] = True
    if type_name == "string":
        array = np.empty(count, dtype=object)
        array[:] = values
    else:
        array = np.array(values, dtype=np.float64 if type_name == "double" else np.int64)
    return array, values, bad


def _coerce_input(name: str, type_name: str, value: Any) -> float | int | str:
    if type_name == "string":
        if not isinstance(value, str) or len(value) > MAX_INPUT_STRING:
            raise MethodologyError(f"input {name!r} must be text of at most {MAX_INPUT_STRING}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MethodologyError(f"input {name!r} must be a number")
    if type_name == "int":
        if isinstance(value, float) and not value.is_integer():
            raise MethodologyError(f"input {name!r} must be a whole number")
        if not -(2**63) <= value < 2**63:
            raise MethodologyError(f"input {name!r} is out of range")
        return int(value)
    if not math.isfinite(value):
        raise MethodologyError(f"input {name!r} must be a finite number")
    return float(value)


def _runtime_reason(message: str) -> str:
    """CEL's runtime message without its status words ("INTERNAL: ... [INTERNAL]")."""
    message = message.split(": ", 1)[-1] if ": " in message else message
    return _STATUS_WORDS.sub("", message).strip()


def _limit_reason(error: RuntimeError) -> str:
    """Why CEL stopped a formula at run time (it raises rather than give an error value)."""
    reason = _runtime_reason(str(error))
    if "budget" in reason.lower():
        return "exceeds CEL's iteration budget (its comprehensions run too many steps)"
    return reason


def _compile_reason(message: str) -> str:
    """CEL's compiler message as `line L, column C: what`, without its ASCII-art caret."""
    found = _CEL_ERROR.search(message)
    if not found:
        first = message.strip().splitlines()[0] if message.strip() else "does not compile"
        return _STATUS_WORDS.sub("", first).strip()
    line, column, what = found.groups()
    return f"line {line}, column {column}: {what.strip()}"


def digest_of(document: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the methodology document: what a credit names."""
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def compile_methodology(
    document: Any,
    problems: Problems,
    where: str = "methodology",
    limits: MethodologyLimits = DEFAULT_LIMITS,
    strict: bool = True,
) -> Methodology | None:
    """Check a methodology document and compile its formulas; every fault found goes into
    `problems` with its path (`methodology.formulas[2].expression`), and None is returned
    when there was any. `strict` (a methodology being registered) also refuses a parameter
    no formula uses; a document stored before that rule (strict=False) still computes."""
    if not isinstance(document, dict):
        problems.add(where, "expected an object with id, version, parameters, inputs, formulas")
        return None
    before = len(problems.items)
    known = {
        "id",
        "version",
        "title",
        "reference",
        "parameters",
        "rules",
        "inputs",
        "formulas",
        "result",
    }
    for extra in sorted(set(document) - known):
        problems.add(f"{where}.{extra}", "not a field of a methodology")
    ident, version = document.get("id"), document.get("version")
    if not isinstance(ident, str) or not re.match(r"^[a-z0-9][a-z0-9\-]{0,63}$", ident):
        problems.add(f"{where}.id", "expected lower-case letters, digits and hyphens (1-64)")
    if not isinstance(version, str) or not VERSION.match(version):
        problems.add(f"{where}.version", "expected a version such as 1.0.0")
    title = _text(document, "title", where, problems, limits, required=True)
    reference = _text(document, "reference", where, problems, limits, required=False)
    parameters = _parameters(document.get("parameters"), f"{where}.parameters", problems, limits)
    rules, measure = _rules(document.get("rules"), where, problems, limits)
    inputs = _inputs(document.get("inputs"), where, problems, limits)
    clash = set(parameters) & set(inputs)
    for name in sorted(clash):
        problems.add(f"{where}.inputs.{name}", "a parameter has this name too")
    formulas, programs = _formulas(
        document.get("formulas"), parameters, inputs, where, problems, limits
    )
    result = document.get("result")
    if not isinstance(result, str) or result not in {f.name for f in formulas}:
        problems.add(f"{where}.result", "expected the name of one of the formulas")
    uses = _references(formulas, parameters, inputs)
    if strict and len(problems.items) == before:
        _within_budget(formulas, programs, parameters, inputs, where, problems)
    if strict and len(problems.items) == before:
        used = {name for names in uses for name in names}
        for name in sorted(set(parameters) - used):
            problems.add(
                f"{where}.parameters.{name}",
                "no formula uses this parameter: use it in a formula or remove it"
                + (" (a threshold the platform applies belongs in rules)" if name in RULES else ""),
            )
    if len(problems.items) > before:
        return None
    return Methodology(
        id=ident,
        version=version,
        title=title,
        reference=reference,
        parameters=parameters,
        inputs=inputs,
        formulas=formulas,
        result=result,
        document=document,
        digest=digest_of(document),
        rules=rules,
        measure=measure,
        _programs=tuple(programs),
        _uses=uses,
        limits=limits,
    )


def _text(
    document: dict[str, Any],
    key: str,
    where: str,
    problems: Problems,
    limits: MethodologyLimits,
    required: bool,
) -> str:
    value = document.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value) or len(value) > limits.max_text_chars:
        problems.add(
            f"{where}.{key}", f"expected text of at most {limits.max_text_chars} characters"
        )
        return ""
    return value


def _entries(
    value: Any, path: str, most: int, problems: Problems
) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(value, dict):
        problems.add(path, "expected an object of named entries")
        return []
    if len(value) > most:
        problems.add(path, f"at most {most} entries")
        return []
    entries = []
    for name, entry in value.items():
        if not NAME.match(name):
            problems.add(f"{path}.{name}", "names start with a letter, then letters, digits or _")
        elif not isinstance(entry, dict):
            problems.add(f"{path}.{name}", "expected an object")
        else:
            entries.append((name, entry))
    return entries


def _rules(
    value: Any, where: str, problems: Problems, limits: MethodologyLimits
) -> tuple[dict[str, Parameter], str]:
    """The thresholds section (only names the platform applies, each in its own unit) and
    the measure it declares (see MEASURE; undeclared, it follows the document's form)."""
    if value is None:
        return {}, "sessions"  # 1.0.0's form: no rules section, the sessions' sum credited
    measure = "meter"
    if isinstance(value, dict) and MEASURE in value:
        value = dict(value)
        measure = _measure(value.pop(MEASURE), f"{where}.rules.{MEASURE}", problems, limits)
    found = _parameters(value, f"{where}.rules", problems, limits)
    for name, rule in found.items():
        if name not in RULES:
            problems.add(
                f"{where}.rules.{name}",
                f"not a rule the platform applies (one of {', '.join(sorted([*RULES, MEASURE]))})",
            )
        elif rule.unit != RULES[name]:
            problems.add(f"{where}.rules.{name}.unit", f"expected {RULES[name]}")
        elif name == REGISTER_RATE and not rule.value > 0:
            # 0 would make every rise of every register a gap: nothing would ever count
            problems.add(f"{where}.rules.{name}.value", "expected a rate above 0 kWh a day")
    return found, measure


def _measure(entry: Any, at: str, problems: Problems, limits: MethodologyLimits) -> str:
    """rules.measure: {"value": "sessions" | "meter", "unit": "measure", "source": ...}."""
    if not isinstance(entry, dict):
        problems.add(at, "expected an object with value, unit and source")
        return "meter"
    if entry.get("value") not in MEASURES:
        problems.add(f"{at}.value", f"expected one of {', '.join(MEASURES)}")
    if entry.get("unit") != MEASURE_UNIT:
        problems.add(f"{at}.unit", f"expected {MEASURE_UNIT}")
    source = entry.get("source")
    if not isinstance(source, str) or not source or len(source) > limits.max_text_chars:
        problems.add(f"{at}.source", "every rule names its source")
    for extra in sorted(set(entry) - {"value", "unit", "source"}):
        problems.add(f"{at}.{extra}", "not a field of a rule")
    value = entry.get("value")
    return value if value in MEASURES else "meter"


def _parameters(
    value: Any, path: str, problems: Problems, limits: MethodologyLimits
) -> dict[str, Parameter]:
    found: dict[str, Parameter] = {}
    for name, entry in _entries(value, path, limits.max_parameters, problems):
        at = f"{path}.{name}"
        number = entry.get("value")
        if isinstance(number, bool) or not isinstance(number, int | float):
            problems.add(f"{at}.value", "expected a number")
            continue
        if not math.isfinite(float(number)):
            problems.add(f"{at}.value", "expected a finite number")
            continue
        unit, source = entry.get("unit"), entry.get("source")
        if not isinstance(unit, str) or not unit or len(unit) > 64:
            problems.add(f"{at}.unit", "expected a unit (1-64 characters), e.g. tCO2e/TJ")
            continue
        if not isinstance(source, str) or not source or len(source) > limits.max_text_chars:
            problems.add(f"{at}.source", "every parameter names its source")
            continue
        for extra in sorted(set(entry) - {"value", "unit", "source"}):
            problems.add(f"{at}.{extra}", "not a field of a parameter")
        found[name] = Parameter(name, float(number), unit, source)
    return found


def _inputs(
    value: Any, where: str, problems: Problems, limits: MethodologyLimits
) -> dict[str, Input]:
    found: dict[str, Input] = {}
    for name, entry in _entries(value, f"{where}.inputs", limits.max_inputs, problems):
        path = f"{where}.inputs.{name}"
        kind, unit = entry.get("type"), entry.get("unit")
        description = entry.get("description", "")
        if kind not in INPUT_TYPES:
            problems.add(f"{path}.type", f"expected one of {', '.join(INPUT_TYPES)}")
            continue
        if not isinstance(unit, str) or not unit or len(unit) > 64:
            problems.add(f"{path}.unit", "expected a unit (1-64 characters)")
            continue
        if not isinstance(description, str) or len(description) > limits.max_text_chars:
            problems.add(f"{path}.description", "expected text")
            continue
        for extra in sorted(set(entry) - {"type", "unit", "description"}):
            problems.add(f"{path}.{extra}", "not a field of an input")
        found[name] = Input(name, kind, unit, description)
    return found


def _formulas(
    value: Any,
    parameters: dict[str, Parameter],
    inputs: dict[str, Input],
    where: str,
    problems: Problems,
    limits: MethodologyLimits,
) -> tuple[list[Formula], list[Any]]:
    """Compile each formula in an environment of the parameters (doubles), the inputs (their
    declared types) and the formulas before it (their checked result types)."""
    path = f"{where}.formulas"
    if not isinstance(value, list) or not value:
        problems.add(path, "expected a non-empty list of {name, expression, unit}")
        return [], []
    if len(value) > limits.max_formulas:
        problems.add(path, f"at most {limits.max_formulas} formulas")
        return [], []
    variables: dict[str, cel.Type] = {name: cel.Type.DOUBLE for name in parameters}
    variables |= {name: INPUT_TYPES[spec.type] for name, spec in inputs.items()}
    formulas: list[Formula] = []
    programs: list[Any] = []
    for index, entry in enumerate(value):
        at = f"{path}[{index}]"
        if not isinstance(entry, dict):
            problems.add(at, "expected an object with name, expression and unit")
            continue
        name, expression, unit = entry.get("name"), entry.get("expression"), entry.get("unit")
        description = entry.get("description", "")
        if not isinstance(name, str) or not NAME.match(name):
            problems.add(f"{at}.name", "names start with a letter, then letters, digits or _")
            continue
        if name in variables:
            problems.add(f"{at}.name", f"{name!r} is already a parameter, input or formula")
            continue
        if not isinstance(unit, str) or not unit or len(unit) > 64:
            problems.add(f"{at}.unit", "expected a unit (1-64 characters)")
            continue
        if not isinstance(description, str) or len(description) > limits.max_text_chars:
            problems.add(f"{at}.description", "expected text")
            continue
        if not isinstance(expression, str) or not expression.strip():
            problems.add(f"{at}.expression", "expected a CEL expression")
            continue
        if len(expression) > limits.max_expression_chars:
            problems.add(
                f"{at}.expression", f"longer than {limits.max_expression_chars} characters"
            )
            continue
        program = _compile(expression, dict(variables))
        if isinstance(program, str):
            problems.add(f"{at}.expression", program)
            continue
        kind = program.return_type()
        if kind not in (cel.Type.DOUBLE, cel.Type.INT):
            problems.add(f"{at}.expression", f"gives {kind.name().lower()}, not a number")
            continue
        variables[name] = kind
        formulas.append(Formula(name, expression, unit, description))
        programs.append(program)
    return formulas, programs


_SAMPLE: dict[str, Any] = {"double": 1.0, "int": 1, "string": "x"}


def _within_budget(
    formulas: list[Formula],
    programs: list[Any],
    parameters: dict[str, Parameter],
    inputs: dict[str, Input],
    where: str,
    problems: Problems,
) -> None:
    """Refuse a formula that CEL's own limits stop (its iteration budget) with its path.
    CEL gives no cost estimate before running, so each formula runs once here, on sample
    inputs: a methodology's inputs are scalars and CEL has no loop over a number or over
    text, so no comprehension's length depends on them, and a formula within the budget
    here is within it for every input. Other failures on the sample (a division by zero)
    depend on the inputs and are left to evaluation, which names them per claim."""
    data: dict[str, Any] = {name: p.value for name, p in parameters.items()}
    data |= {name: _SAMPLE[spec.type] for name, spec in inputs.items()}
    for index, (formula, program) in enumerate(zip(formulas, programs, strict=True)):
        try:
            value = program.eval(data=data).value()
        except RuntimeError as error:
            problems.add(f"{where}.formulas[{index}].expression", _limit_reason(error))
            return
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        data[formula.name] = value if numeric else 1.0


def _compile(expression: str, variables: dict[str, cel.Type]) -> Any:
    """A checked CEL program, or the reason it is not one."""
    key = tuple(sorted((name, kind.name()) for name, kind in variables.items()))
    return _compile_cached(expression, key)


@lru_cache(maxsize=1024)
def _compile_cached(expression: str, variables: tuple[tuple[str, str], ...]) -> Any:
    by_name = {"DOUBLE": cel.Type.DOUBLE, "INT": cel.Type.INT, "STRING": cel.Type.STRING}
    env = cel.NewEnv(variables={name: by_name[kind] for name, kind in variables})
    try:
        return env.compile(expression)
    except RuntimeError as error:  # CEL reports parse and check failures this way
        return _compile_reason(str(error))


def to_smallest_unit(value: float, decimals: int) -> int:
    """Credits in a token's smallest unit, rounded down: a methodology never credits more
    than it computed."""
    if not math.isfinite(value) or value <= 0:
        return 0
    return int((Decimal(repr(value)) * (Decimal(10) ** decimals)).to_integral_value(ROUND_DOWN))
