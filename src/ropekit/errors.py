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

from collections.abc import Callable
from typing import Any

#: how a message writes an argument: ``name("window")``, or with a value to pass, ``name("window", 2048)``
Namer = Callable[..., str]


def argument_name(argument: str, *value: Any) -> str:
    """The library's own way to write an argument in a message: its name, or ``name=value!r`` (``force=True``)."""
    return f"{argument}={value[0]!r}" if value else argument


class Placeholder(str):
    """A value that stands for any the user chooses (``W`` in ``window=W``): written bare, never quoted."""

    def __repr__(self) -> str:
        return str(self)


class InvalidArgument(ValueError):
    """An argument with a value outside what is allowed.

    The message is ``"<argument> <rule>, got <value!r>"`` unless ``message`` is given whole: as text, or as a
    function of a :data:`Namer` that writes every argument it mentions through it, so a front end can write each
    as its own option (:meth:`describe`). ``leads`` says whether the message starts with the argument as its
    subject (default: when it starts with the name and a space, ``=`` or ``:``).

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
        message: str | Callable[[Namer], str] | None = None,
        leads: bool | None = None,
    ) -> None:
        self.argument, self.value, self.allowed = argument, value, allowed
        if message is None:
            message = f"{argument} {rule}, got {value!r}"
        self._message = message
        text = self.describe()
        if leads is None:
            leads = text.startswith((f"{argument} ", f"{argument}=", f"{argument}:"))
        self.leads = leads
        super().__init__(text)

    def describe(self, name: Namer = argument_name) -> str:
        """The message with every argument it mentions written by ``name`` (a front end passes one that writes its
        options); a message given as text has only its leading argument to rewrite."""
        if callable(self._message):
            return self._message(name)
        text = self._message
        if getattr(self, "leads", False) and name is not argument_name:
            return name(self.argument) + text[len(self.argument) :]
        return text


def renamed(error: InvalidArgument, argument: str) -> Callable[[Namer], str]:
    """``error``'s message as one about ``argument`` instead of its own (``lengths`` of the task settings is
    ``tasks.lengths`` of the evaluation), for a new error's ``message``."""

    def message(name: Namer) -> str:
        return error.describe(lambda given, *value: name(argument if given == error.argument else given, *value))

    return message


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
