"""The exceptions the library raises about its callers' arguments, carrying the argument they are about.

A front end (the CLI) names the option the user typed from ``InvalidArgument.argument``, never from the
message text, so rewording a message cannot change which option the user is told about. This module imports
nothing from ropekit (the core, the evaluation code and the CLI all use it).

Example:
    >>> try:
    ...     raise InvalidArgument("window", 0, "must be >= 1", allowed=">= 1")
    ... except ValueError as error:
    ...     print(error, "|", error.argument)
    window must be >= 1, got 0 | window
"""

from __future__ import annotations

from typing import Any


class InvalidArgument(ValueError):
    """An argument with a value outside what is allowed.

    The message is ``"<argument> <rule>, got <value!r>"`` unless ``message`` is given whole; ``leads`` says whether
    that message starts with the argument as its subject (default: when it starts with the name and a space or
    ``=``), so a front end can put its own name for the argument there (:attr:`detail`).

    Attributes:
        argument: the library's name of the argument (``rotary_dim``, ``text``, ``params``).
        value: the value given.
        allowed: what is allowed, in words or as a collection (``None`` when the rule says it).
    """

    def __init__(
        self,
        argument: str,
        value: Any,
        rule: str = "",
        *,
        allowed: Any = None,
        message: str | None = None,
        leads: bool | None = None,
    ) -> None:
        self.argument, self.value, self.allowed = argument, value, allowed
        text = message if message is not None else f"{argument} {rule}, got {value!r}"
        if leads is None:
            leads = text.startswith((f"{argument} ", f"{argument}="))
        self.leads = leads
        super().__init__(text)

    @property
    def detail(self) -> str:
        """The message after its leading argument name (``" must be >= 1, got 0"``), or ``": <message>"`` when it
        does not lead with it: a front end writes its own name for the argument in front."""
        text = str(self)
        return text[len(self.argument) :] if self.leads else f": {text}"


class ArgumentType(InvalidArgument, TypeError):
    """An argument of the wrong type (also a ``TypeError``, as Python's own are)."""


class MissingFile(InvalidArgument, FileNotFoundError):
    """A path argument that names nothing there, or a folder without the file it needs (also a
    ``FileNotFoundError``, as Python's own are)."""


class PathExists(InvalidArgument, FileExistsError):
    """A path argument that names something of the wrong kind (a file where a folder goes, the reverse, or neither)
    (also a ``FileExistsError``)."""


class UnknownParameters(InvalidArgument):
    """Parameter names a method does not have.

    Attributes:
        argument: ``"params"``.
        value: the unknown names, sorted.
        allowed: the names the method accepts.
    """

    def __init__(self, unknown: list[str], allowed: list[str], message: str) -> None:
        super().__init__("params", sorted(unknown), allowed=list(allowed), message=message)
