"""MkDocs hook: the settings reference, rendered from the pydantic settings model.

The table is built from `twinhub.settings.Settings` at every build, so the documentation
cannot drift from what the code reads. Nested models (one per context) get a section each;
a field's environment variable is its alias or validation alias when one is set, else its
upper-cased name (pydantic-settings' default, case-insensitive).
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, AliasPath, BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

MARKER = "<!-- settings-table -->"
_SRC = Path(__file__).resolve().parents[2] / "src"


def _settings_model() -> type[BaseModel]:
    """The settings class, imported from this checkout's sources when not installed."""
    if str(_SRC) not in sys.path:
        sys.path.insert(0, str(_SRC))
    from twinhub.settings import Settings

    return Settings


def env_name(name: str, field: FieldInfo, prefix: str = "") -> str:
    """The environment variable a field is read from."""
    for alias in (field.validation_alias, field.alias):
        if isinstance(alias, str):
            return alias.upper()
        if isinstance(alias, AliasChoices):
            first = next((c for c in alias.choices if isinstance(c, str)), None)
            if first is not None:
                return first.upper()
        if isinstance(alias, AliasPath) and alias.path and isinstance(alias.path[0], str):
            return str(alias.path[0]).upper()
    return f"{prefix}{name}".upper()


def type_name(annotation: Any) -> str:
    """A short, readable name of a field's type (`int`, `str or unset`, ...)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        text = " or ".join(type_name(a) for a in args)
        return f"{text} (optional)" if len(args) < len(typing.get_args(annotation)) else text
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if origin is not None:
        return str(annotation).replace("typing.", "")
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(str(member.value) for member in annotation)
    return getattr(annotation, "__name__", str(annotation))


def default_text(field: FieldInfo) -> str:
    """The default as a reader would type it; `unset` for None, `computed` for factories."""
    if field.default_factory is not None:
        return "computed"
    value = field.default
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, SecretStr):
        return "secret"
    if value == "":
        return "empty"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _nested(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _title(name: str) -> str:
    """A section's heading from its field name: `ussd` -> USSD, `oracle` -> Oracle."""
    words = name.replace("_", " ")
    return words.upper() if len(words) <= 4 else words.capitalize()


def sections(
    model: type[BaseModel], title: str = "General", intro: str = ""
) -> list[tuple[str, str, list[str]]]:
    """(section title, its introduction, table rows) for the model's own fields, then one
    section per nested model, depth first."""
    rows: list[str] = []
    found: list[tuple[str, str, list[str]]] = []
    for name, field in model.model_fields.items():
        inner = _nested(field.annotation)
        if inner is not None:
            about = " ".join((field.description or inner.__doc__ or "").split())
            found.extend(sections(inner, _title(name), about))
            continue
        rows.append(
            f"| `{env_name(name, field)}` | {_cell(type_name(field.annotation))} | "
            f"{_cell(default_text(field))} | {_cell(field.description or '')} |"
        )
    return ([(title, intro, rows)] if rows else []) + found


def render(model: type[BaseModel] | None = None) -> str:
    """The whole reference: a table per section."""
    parts: list[str] = []
    for title, intro, rows in sections(model or _settings_model()):
        parts += [f"## {title}", ""]
        if intro:
            parts += [intro, ""]
        parts += ["| variable | type | default | meaning |", "|---|---|---|---|", *rows, ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: put the table where the page holds the marker."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
