"""A Griffe extension for the documentation site (mkdocs.yml): the code's docstrings cite other objects with
Sphinx roles (``:func:`train```, ``:class:`~iclab.train.TrainConfig```), which mkdocstrings would print as they are.
Each becomes a cross-reference to the object's entry where the site documents it, else its name in code type:
``~`` keeps the last part of the name, as Sphinx does, and a short name is resolved in the docstring's scope."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`(~?)([^`<>]+?)`")


def cross_reference(obj: griffe.Object, match: re.Match) -> str:
    """One role as an optional cross-reference (a link where the target has an entry, its name otherwise)."""
    short, name = match[1] == "~", match[2].strip()
    shown = name.rsplit(".", 1)[-1] if short else name
    return f'<autoref identifier="{_resolve(obj, name)}" optional><code>{shown}</code></autoref>'


def _resolve(obj: griffe.Object, name: str) -> str:
    """``name``'s full path: as written when it is one, else resolved from ``obj``'s scope (its members first, as
    Sphinx reads ``:meth:`complete``` in a class's docstring), else as written."""
    if name.startswith("iclab."):
        return name
    first, _, rest = name.partition(".")
    for scope in (obj, obj.parent):
        if scope is None:
            continue
        try:
            found = scope.members[first].path if first in scope.members else scope.resolve(first)
        except (griffe.NameResolutionError, KeyError, AttributeError):
            continue
        return f"{found}.{rest}" if rest else found
    return name


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring of a package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        for obj in _objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = ROLE.sub(lambda match: cross_reference(obj, match), obj.docstring.value)


def _objects(obj: griffe.Object, seen: set | None = None):
    """``obj`` and every object under it (aliases left to their targets)."""
    seen = set() if seen is None else seen
    if obj.path in seen:
        return
    seen.add(obj.path)
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member, seen)
