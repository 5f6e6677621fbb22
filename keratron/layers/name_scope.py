"""`keras.name_scope`: a named prefix for the paths of the layers built and the weights
created inside it."""

from __future__ import annotations

from keratron.layers.layer import _scopes

__all__ = ["name_scope"]


class name_scope:  # noqa: N801 (Keras's name)
    """Opens a sub-namespace: layers built inside it get paths, and their weights paths,
    under `"<outer scopes>/<name>/"`, as Keras's scopes nest.

    keratron keeps one scope stack, the one its layers open around their build and weight
    creation; a bare `keratron.Variable` (not a layer weight) keeps its own name as its path.

    Args:
        name: the scope's name (a string without "/").
        caller: the object opening the scope; with `deduplicate`, a scope of the same name
            and caller directly inside it is not opened again.
        deduplicate: see `caller`.
        override_parent: Keras's absolute parent path; keratron's layer scopes always nest
            from the outermost one, so a value other than None is refused.

    Example:
        >>> with keratron.name_scope("encoder"):
        ...     layer = keratron.layers.Dense(2, name="proj")
        ...     layer.build((None, 3))
        >>> layer.kernel.path
        'encoder/proj/kernel'
    """

    def __init__(self, name, caller=None, deduplicate=True, override_parent=None):
        if not isinstance(name, str) or "/" in name:
            raise ValueError(
                "Argument `name` must be a string and cannot contain character `/`. "
                f"Received: name={name}"
            )
        if override_parent is not None:
            raise ValueError(
                "name_scope: `override_parent` (an absolute parent path) is not supported; "
                f"keratron's scopes always nest. Received: override_parent={override_parent!r}"
            )
        self.name = name
        self.caller = caller
        self.deduplicate = deduplicate
        self.override_parent = override_parent
        self._pop_on_exit = False

    def __enter__(self):
        stack = _scopes.stack
        if self.deduplicate and stack and self.caller is not None:
            parent_name, parent_caller = stack[-1]
            if parent_caller is self.caller and parent_name == self.name:
                return self
        stack.append((self.name, self.caller))
        self._pop_on_exit = True
        return self

    def __exit__(self, *exc):
        if self._pop_on_exit:
            _scopes.stack.pop()
            self._pop_on_exit = False
