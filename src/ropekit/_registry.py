"""One registry type for everything ropekit looks up by name: scaling methods, attention methods and tasks.

A :class:`Registry` maps names to entries in registration order. An entry is registered eagerly (an object, or a
decorator in the entry's own file) or lazily (``"module:attr"``, imported on the first :meth:`Registry.get`). A
registry may have a *home* package: the modules of that package that register entries (those whose source
contains the registry's marker, e.g. ``@register_scaling``) are imported on first need, so a new file in the
package is registered without any other file naming it.

:func:`declared_names` reads the names a package's modules declare (a class attribute such as
``rope_type = "yarn"``) from their source without importing them, so ``--help`` lists every method while staying
free of numpy and torch.

Standard library only, no ropekit imports: every layer may use it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

__all__ = ["Registry", "UnknownName", "declared_names"]

T = TypeVar("T")


class UnknownName(ValueError, LookupError):
    """A name no entry of a registry has.

    A ``ValueError`` (bad input) and a ``LookupError``, carrying what a caller needs to name the argument itself.

    Attributes:
        kind: what the registry holds (``rope_type``, ``attention method``, ``task``).
        name: the name asked for.
        available: the registered names, in registration order (the message adds the aliases).
    """

    def __init__(self, kind: str, name: object, available: tuple[str, ...], aliases: dict[str, str] | None = None):
        self.kind, self.name, self.available = kind, name, available
        listed = (*available, *(f"{alias} (= {target})" for alias, target in (aliases or {}).items()))
        super().__init__(f"unknown {kind} {name!r}; available: {', '.join(listed)}")


class _Lazy:
    """A lazy entry: ``module:attr``, imported on first use."""

    __slots__ = ("attr", "module")

    def __init__(self, target: str) -> None:
        module, sep, attr = target.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"a lazy entry must look like 'module:attr', got {target!r}")
        self.module, self.attr = module, attr


class Registry(Generic[T]):
    """Names → entries, in registration order; read like a mapping (``registry[name]`` is :meth:`get`, ``in``,
    iteration, ``items()``), except that :meth:`get` raises on an unknown name instead of returning ``None``.

    Args:
        kind: what the entries are, for messages (``"rope_type"``, ``"attention method"``, ``"task"``).
        home: a package whose modules register entries when imported (``None``: entries register themselves).
        marker: the text that marks a module of ``home`` as one that registers entries (e.g. ``"@register"``);
            only those modules are imported, so the package's heavy modules stay unimported.
    """

    def __init__(self, kind: str, *, home: str | None = None, marker: str = "") -> None:
        self.kind, self.home, self.marker = kind, home, marker
        self._entries: dict[str, T | _Lazy] = {}
        #: alias → name; ``get`` accepts an alias, ``names`` leaves aliases out
        self.aliases: dict[str, str] = {}
        self._loaded = home is None
        self._importing: str | None = None  # the module of the lazy entry being resolved

    @overload
    def register(self, name: str, entry: None = None, *, aliases: tuple[str, ...] = ()) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, entry: T, *, aliases: tuple[str, ...] = ()) -> T: ...

    def register(self, name: str, entry: T | None = None, *, aliases: tuple[str, ...] = ()) -> Any:
        """Register ``entry`` under ``name`` (and ``aliases``); without ``entry``, a decorator that registers what
        it decorates.

        Raises:
            ValueError: an empty name, or a name or alias already taken.
        """
        if entry is None:
            return lambda decorated: self.register(name, decorated, aliases=aliases)
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        current = self._entries.get(name)
        fulfils = isinstance(current, _Lazy) and current.module == self._importing  # its lazy module registers it
        taken = [n for n in (name, *aliases) if (n in self._entries and not fulfils) or n in self.aliases]
        if taken:
            raise ValueError(f"{self.kind} {', '.join(map(repr, taken))} is already registered")
        self._entries[name] = entry
        self.aliases.update(dict.fromkeys(aliases, name))
        return entry

    def register_lazy(self, name: str, target: str) -> None:
        """Register ``name`` as the attribute ``attr`` of ``module`` (``target = "module:attr"``), imported on the
        first :meth:`get`. Importing the module may register ``name`` itself; then that entry is used."""
        if not name or name in self._entries or name in self.aliases:
            raise ValueError(f"{self.kind} name {name!r} is empty or already registered")
        self._entries[name] = _Lazy(target)

    def unregister(self, name: str) -> None:
        """Remove ``name`` and its aliases (for tests that register a toy entry)."""
        del self._entries[name]
        for alias in [a for a, target in self.aliases.items() if target == name]:
            del self.aliases[alias]

    def __delitem__(self, name: str) -> None:
        """Remove ``name`` only (its aliases stay; :meth:`unregister` removes both)."""
        del self._entries[name]

    def load(self) -> None:
        """Import the modules of ``home`` that register entries (once; nothing without a home)."""
        if self._loaded:
            return
        self._loaded = True
        package = importlib.import_module(self.home)  # type: ignore[arg-type]
        for info in pkgutil.iter_modules(package.__path__):
            path = Path(package.__path__[0]) / f"{info.name}.py"
            if not info.name.startswith("_") and path.is_file() and self.marker in path.read_text(encoding="utf-8"):
                importlib.import_module(f"{self.home}.{info.name}")

    def get(self, name: str) -> T:
        """The entry of ``name`` (or of the name an alias stands for), resolving a lazy entry on first use.

        Raises:
            UnknownName: no such name (a ``ValueError`` whose message lists the registered names).
        """
        if not isinstance(name, str):
            raise UnknownName(self.kind, name, self.names(), self.aliases)
        key = self.aliases.get(name, name)
        if key not in self._entries:
            self.load()
        if key not in self._entries:
            raise UnknownName(self.kind, name, self.names(), self.aliases)
        entry = self._entries[key]
        if isinstance(entry, _Lazy):
            self._importing = entry.module
            try:
                module = importlib.import_module(entry.module)
            finally:
                self._importing = None
            current = self._entries.get(key)
            if current is entry:  # the module did not register the name itself
                self._entries[key] = getattr(module, entry.attr)
            return self._entries[key]  # type: ignore[return-value]
        return entry

    def names(self) -> tuple[str, ...]:
        """Every registered name (aliases left out), in registration order."""
        self.load()
        return tuple(self._entries)

    def __getitem__(self, name: str) -> T:
        try:
            return self.get(name)
        except UnknownName as error:
            raise KeyError(name) from error

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self.load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def keys(self) -> tuple[str, ...]:
        return self.names()

    def values(self) -> list[T]:
        return [self.get(name) for name in self.names()]

    def items(self) -> list[tuple[str, T]]:
        return [(name, self.get(name)) for name in self.names()]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"


@functools.cache
def declared_names(package: str, attribute: str) -> tuple[str, ...]:
    """The names the modules of ``package`` declare as ``attribute = "name"`` in a class body, read from their
    source without importing them (modules in file-name order, classes in source order; empty values left out).

    What ``--help`` lists: importing the methods would import numpy (scalings) or torch (attention methods). The
    declaration is the class attribute on its own line of the class body, as every method writes it (a test keeps
    these names equal to what the registries hold). A line scan, not a parse: it costs about a millisecond, where
    parsing every module would add a tenth of a second to each command's start.
    """
    spec = importlib.util.find_spec(package)  # imports the parent packages only
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package!r} is not a package")
    assignment = re.compile(rf"^    {re.escape(attribute)}\s*=\s*([\"'])(.+?)\1\s*(?:#.*)?$")
    names: list[str] = []
    for path in sorted(Path(next(iter(spec.submodule_search_locations))).glob("[!_]*.py")):
        in_class = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if line[:1].isalpha() or line[:1] == "@":  # a top-level statement: is it a class?
                in_class = line.startswith("class ")
            elif in_class and (match := assignment.match(line)) and match.group(2) not in names:
                names.append(match.group(2))
    return tuple(names)
