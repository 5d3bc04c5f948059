"""A methodology's CEL formulas as numpy operations over a batch of stoves: one pass per
formula for the whole fleet instead of one CEL evaluation per stove and formula.

CEL stays the definition: a formula is compiled and type-checked by CEL first
(mrv.methodology), and only then translated here, node by node, when every part of it is in
the subset below; anything else (int division, a function, a macro, a field, an escaped
string) is not translated and the methodology is evaluated stove by stove by CEL. The
subset keeps CEL's semantics exactly: doubles are IEEE binary64 in both (+, -, *, / and the
comparisons are the same correctly rounded operations), ints are int64, and where CEL would
give an error (an int overflow, `int()` out of range) the row is marked unsettled, so the
caller evaluates that stove by CEL and reports CEL's own error. A result that is not a
finite double is left to CEL the same way (tests/unit/test_formula_arrays.py checks the
two paths against each other on hypothesis-generated inputs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

# A node's value over the batch, and the rows where CEL would not give that value (an error).
Column = tuple[np.ndarray, np.ndarray]
Node = Callable[[Mapping[str, np.ndarray], int], Column]
INT64_LIMIT = 2.0**62  # |a| * |b| below this cannot overflow int64 (checked in doubles)

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<double>\d*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)"
    r"|(?P<int>\d+)(?![\w.])"
    r"|(?P<string>\"[^\"\\\n]*\"|'[^'\\\n]*')"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>&&|\|\||==|!=|<=|>=|[-+*/%<>!?:()])"
    r")"
)
_RESERVED = {"in", "null", "as", "break", "const", "continue", "else", "for", "function"}


def _logical_not(operand: tuple[Node, str]) -> tuple[Node, str]:
    node, kind = operand
    if kind != "bool":
        raise Unsupported("! of a non-bool")
    return (lambda env, n: _not(node(env, n))), "bool"


class Unsupported(Exception):
    """The expression uses CEL outside the translated subset: evaluate it by CEL."""


def translate(expression: str, types: Mapping[str, str]) -> tuple[Node, str]:
    """The expression as a function of the batch's columns, and its type (int, double, bool
    or string); `types` gives each name's type. Raises Unsupported outside the subset."""
    tokens = _tokens(expression)
    parser = _Parser(tokens, types)
    node, kind = parser.expression()
    if parser.at < len(tokens):
        raise Unsupported(f"unexpected {tokens[parser.at][1]!r}")
    return node, kind


def _tokens(expression: str) -> list[tuple[str, str]]:
    found, at = [], 0
    expression = expression.rstrip()
    while at < len(expression):
        match = _TOKEN.match(expression, at)
        if match is None or match.end() == at:
            raise Unsupported(f"not translated: {expression[at : at + 10]!r}")
        kind = match.lastgroup
        assert kind is not None
        found.append((kind, match.group(kind)))
        at = match.end()
    return found


class _Parser:
    """CEL's grammar for the subset, lowest precedence first: ?:, ||, &&, relations,
    + -, * / %, unary ! -, then literals, names, double()/int() and parentheses."""

    def __init__(self, tokens: list[tuple[str, str]], types: Mapping[str, str]) -> None:
        self.tokens, self.types, self.at = tokens, types, 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, wanted: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise Unsupported("unexpected end")
        token = self.tokens[self.at]
        if wanted is not None and (token[0] != "op" or token[1] != wanted):
            raise Unsupported(f"expected {wanted!r}")
        self.at += 1
        return token

    def expression(self) -> tuple[Node, str]:
        condition = self.binary(0)
        if self.peek() != "?":
            return condition
        self.take("?")
        yes = self.binary(0)
        self.take(":")
        no = self.expression()
        return _conditional(condition, yes, no)

    _LEVELS = (("||",), ("&&",), ("<", "<=", ">", ">=", "==", "!="), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> tuple[Node, str]:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.at < len(self.tokens) and self.tokens[self.at][0] == "op":
            op = self.tokens[self.at][1]
            if op not in self._LEVELS[level]:
                break
            self.take()
            right = self.binary(level + 1)
            left = _binary(op, left, right)
        return left

    def unary(self) -> tuple[Node, str]:
        """A run of `!` or of `-` as CEL's parser reads it: an even run cancels out (CEL
        drops it: `!!s` is `s`), an odd run is one operator."""
        for op in ("!", "-"):
            run = 0
            while self.peek() == op and self.tokens[self.at][0] == "op":
                self.take()
                run += 1
            if run:
                operand = self.primary()
                if run % 2 == 0:
                    return operand
                return _negate(operand) if op == "-" else _logical_not(operand)
        return self.primary()

    def primary(self) -> tuple[Node, str]:
        kind, text = self.take()
        if kind == "double":
            return _constant(np.float64(float(text)), "double")
        if kind == "int":
            value = int(text)
            if value >= 2**63:
                raise Unsupported("int literal out of range")
            return _constant(np.int64(value), "int")
        if kind == "string":
            return _constant(text[1:-1], "string")
        if kind == "op":
            if text != "(":
                raise Unsupported(f"unexpected {text!r}")
            inner = self.expression()
            self.take(")")
            return inner
        if text in ("true", "false"):
            return _constant(np.bool_(text == "true"), "bool")
        if text in _RESERVED:
            raise Unsupported(f"{text} is not translated")
        if self.peek() == "(":
            return self.call(text)
        if self.peek() in (".", "["):
            raise Unsupported("fields and indexes are not translated")
        if text not in self.types:
            raise Unsupported(f"unknown name {text}")
        name, kind_of = text, self.types[text]
        return (lambda env, n: (env[name], _no_errors(n))), kind_of

    def call(self, function: str) -> tuple[Node, str]:
        self.take("(")
        argument, kind = self.expression()
        self.take(")")
        if function == "double" and kind in ("int", "double"):
            if kind == "double":
                return argument, kind
            return (lambda env, n: _as_double(argument(env, n))), "double"
        if function == "int" and kind in ("int", "double"):
            if kind == "int":
                return argument, kind
            return (lambda env, n: _as_int(argument(env, n))), "int"
        raise Unsupported(f"{function}() of {kind} is not translated")


def _no_errors(n: int) -> np.ndarray:
    return np.zeros(n, dtype=bool)


def _constant(value: Any, kind: str) -> tuple[Node, str]:
    def node(env: Mapping[str, np.ndarray], n: int) -> Column:
        if kind == "string":
            column = np.empty(n, dtype=object)
            column[:] = value
            return column, _no_errors(n)
        return np.full(n, value), _no_errors(n)

    return node, kind


def _not(column: Column) -> Column:
    return ~column[0], column[1]


def _negate(operand: tuple[Node, str]) -> tuple[Node, str]:
    node, kind = operand
    if kind == "double":
        return (lambda env, n: (lambda c: (-c[0], c[1]))(node(env, n))), kind
    if kind == "int":

        def negated(env: Mapping[str, np.ndarray], n: int) -> Column:
            values, errors = node(env, n)
            return -values, errors | (values == np.iinfo(np.int64).min)

        return negated, kind
    raise Unsupported(f"- of {kind}")


def _as_double(column: Column) -> Column:
    return column[0].astype(np.float64), column[1]


def _as_int(column: Column) -> Column:
    values, errors = column
    # CEL refuses a double outside int64's range or NaN; such rows are left to CEL.
    bad = ~(np.abs(values) < 2.0**63)
    safe = np.where(bad, 0.0, values)
    return np.trunc(safe).astype(np.int64), errors | bad


def _conditional(
    condition: tuple[Node, str], yes: tuple[Node, str], no: tuple[Node, str]
) -> tuple[Node, str]:
    if condition[1] != "bool" or yes[1] != no[1]:
        raise Unsupported("a conditional of mixed types")
    test, first, second = condition[0], yes[0], no[0]

    def node(env: Mapping[str, np.ndarray], n: int) -> Column:
        flags, errors = test(env, n)
        a, a_errors = first(env, n)
        b, b_errors = second(env, n)
        return np.where(flags, a, b), errors | np.where(flags, a_errors, b_errors)

    return node, yes[1]


_COMPARE = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}


def _binary(op: str, left: tuple[Node, str], right: tuple[Node, str]) -> tuple[Node, str]:
    (a, kind), (b, other) = left, right
    if kind != other:
        raise Unsupported(f"{kind} {op} {other}")  # CEL refuses these: never reached
    if op in ("&&", "||"):
        if kind != "bool":
            raise Unsupported(f"{op} of {kind}")
        logic = np.logical_and if op == "&&" else np.logical_or
        # An error on either side leaves the row to CEL (which may absorb it).
        return _combine(a, b, lambda x, y: (logic(x, y), None)), "bool"
    if op in _COMPARE:
        if kind == "string" and op not in ("==", "!="):
            raise Unsupported("string ordering is not translated")
        compare = _COMPARE[op]
        if kind == "string":
            return _combine(a, b, lambda x, y: (compare(x, y).astype(bool), None)), "bool"
        return _combine(a, b, lambda x, y: (compare(x, y), None)), "bool"
    if kind == "double" and op in ("+", "-", "*", "/"):
        arithmetic = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op]
        return _combine(a, b, lambda x, y: (arithmetic(x, y), None)), "double"
    if kind == "int" and op in ("+", "-", "*"):
        return _combine(a, b, _INT[op]), "int"
    raise Unsupported(f"{kind} {op} is not translated")


def _int_add(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    found = x + y
    return found, ((x ^ found) & (y ^ found)) < 0


def _int_subtract(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    found = x - y
    return found, ((x ^ y) & (x ^ found)) < 0


def _int_multiply(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Wrapped where it overflows; any product near int64's range is left to CEL.
    return x * y, np.abs(x.astype(np.float64) * y.astype(np.float64)) >= INT64_LIMIT


_INT = {"+": _int_add, "-": _int_subtract, "*": _int_multiply}


def _combine(
    a: Node,
    b: Node,
    operation: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]],
) -> Node:
    def node(env: Mapping[str, np.ndarray], n: int) -> Column:
        x, x_errors = a(env, n)
        y, y_errors = b(env, n)
        values, errors = operation(x, y)
        found = x_errors | y_errors
        return values, found if errors is None else found | errors

    return node


def run(node: Node, env: Mapping[str, np.ndarray], n: int) -> Column:
    """The node's values over `n` rows, without numpy's warnings (an infinity or a wrapped
    int is expected here: the rows it concerns are left to CEL)."""
    with np.errstate(all="ignore"):
        return node(env, n)
