"""Reports imports of another keratron package's private names (`make lint` runs it).

A name that starts with one underscore is private to the top-level subpackage of `keratron`
that defines it (`keratron.ops`, `keratron.autodiff`, ...; a top-level module such as
`keratron.config` is its own package). Any other package reaches it only through a public
name. Flagged, wherever they appear (module level or inside a function), when X is not the
importing file's own subpackage:

    from keratron.X._y import z        import keratron.X._y
    from keratron.X.y import _z        from keratron.X import _y

Run: `python tools/check_private_imports.py [paths...]` (default: keratron/). Exits 1 when it
finds an import that `KNOWN` does not list.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "keratron"

# Imports that break the rule today, each with how it goes away: delete an entry once its
# import is gone (an entry that matches nothing is reported, as a reminder).
# {(file relative to the repository, imported dotted name): how to fix it}
KNOWN: dict[tuple[str, str], str] = {}


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _own_package(path: str) -> str | None:
    """'ops' for keratron/ops/linalg.py, 'config' for keratron/config.py, '' for
    keratron/__init__.py; None for a file outside the package."""
    rel = os.path.relpath(os.path.abspath(path), ROOT).split(os.sep)
    if rel[0] != PACKAGE:
        return None
    if len(rel) == 2:
        name = rel[1][:-3] if rel[1].endswith(".py") else rel[1]
        return "" if name == "__init__" else name
    return rel[1]


def _module_of(path: str) -> list[str]:
    rel = os.path.relpath(os.path.abspath(path), ROOT)[: -len(".py")].split(os.sep)
    return rel[:-1] if rel[-1] == "__init__" else rel


def _absolute(node: ast.ImportFrom, path: str) -> str:
    if not node.level:
        return node.module or ""
    base = _module_of(path)
    if not path.endswith("__init__.py"):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _violation(dotted: str, own: str) -> bool:
    """Whether importing the dotted name `keratron.X.rest...` reaches a private of X != own."""
    parts = dotted.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return False
    if parts[1] == own:
        return False
    if own == "" and _is_private(parts[1]):
        return False  # keratron/__init__.py owns the private top-level modules (keratron._x)
    return any(_is_private(p) for p in parts[1:])


def check_file(path: str) -> list[tuple[int, str]]:
    """(line, imported dotted name) of each cross-package private import in `path`."""
    own = _own_package(path)
    if own is None:
        return []
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, path)
            names = [f"{module}.{a.name}" for a in node.names if a.name != "*"]
            names = names or [module]
        else:
            continue
        found += [(node.lineno, name) for name in names if _violation(name, own)]
    return found


def _python_files(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            yield from (os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=[os.path.join(ROOT, PACKAGE)])
    args = parser.parse_args(argv)
    errors, seen = [], set()
    for path in _python_files(args.paths):
        rel = os.path.relpath(os.path.abspath(path), ROOT)
        for line, name in check_file(path):
            if (rel, name) in KNOWN:
                seen.add((rel, name))
                continue
            errors.append(f"{rel}:{line}: imports {name}, private to keratron.{name.split('.')[1]}")
    for rel, name in sorted(set(KNOWN) - seen):
        print(f"warning: KNOWN lists {rel} importing {name}, which is no longer there: delete it")
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} import(s) of another package's private names (see KNOWN).")
        return 1
    print(f"private imports: none across packages ({len(KNOWN) - len(set(KNOWN) - seen)} known)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
