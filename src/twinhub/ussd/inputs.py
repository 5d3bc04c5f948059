"""Turning the gateway's accumulated `text` into the user's new answers.

The telecom gateway sends everything typed in the session joined by `*` (Africa's Talking
style): "" on dial, then "1", "1*2", ... The user's own "*" (exit) arrives as an empty field
between two separators, so a pair of empty fields is read back as "*".
"""

from __future__ import annotations

EXIT = "*"
BACK = "0"


def split_inputs(text: str) -> list[str]:
    """Every answer in an accumulated text, in order."""
    fields = text.split("*")
    answers: list[str] = []
    index = 0
    while index < len(fields):
        if fields[index] == "" and index + 1 < len(fields) and fields[index + 1] == "":
            answers.append(EXIT)
            index += 2
        else:
            answers.append(fields[index])
            index += 1
    return answers


def new_inputs(previous: str | None, text: str) -> list[str]:
    """The answers `text` adds to what the session already applied (`previous`).

    A new session (`previous` is None) replays all of `text`: a shortcut dial such as
    *384*1*2# starts with "1*2". A text that does not extend the previous one comes from a
    gateway that sends only the latest input, so its last answer is taken.
    """
    if previous is None:
        return split_inputs(text) if text else []
    if previous == "":
        return split_inputs(text)
    if text.startswith(previous + "*"):
        added = text[len(previous) + 1 :]
        # One more answer, the usual step: split_inputs would return just that.
        return [added] if "*" not in added else split_inputs(added)
    return split_inputs(text)[-1:]
