"""`keras.utils.Config`: a dict of named values also read and written as attributes, that can
be frozen and dumped as JSON."""

from __future__ import annotations

import copy
import difflib
import json

__all__ = ["Config"]


class Config:
    """A dict-like container of named values, as `keras.utils.Config`.

    Values are set and read as items or attributes; `freeze()` makes every later change raise
    a ValueError; `to_json()` dumps the values. Iterating yields the names in sorted order.

    Example:
        >>> config = keratron.utils.Config(learning_rate=0.1)
        >>> config.seed = 123
        >>> config["seed"], config.learning_rate
        (123, 0.1)
    """

    # The names of the object's own attributes (methods, `_config`, ...); every other
    # attribute name is a config entry. None while `__init__` sets the object up.
    __attrs__ = None

    def __init__(self, **kwargs):
        self._config = kwargs
        self._frozen = False
        self.__attrs__ = set(dir(self))

    @property
    def frozen(self) -> bool:
        """Whether the config is frozen."""
        return self._frozen

    def freeze(self) -> None:
        """Forbids any further change."""
        self._frozen = True

    def unfreeze(self) -> None:
        """Allows changes again."""
        self._frozen = False

    def _raise_if_frozen(self):
        if self._frozen:
            raise ValueError("Cannot mutate attribute(s) because the config is frozen.")

    def as_dict(self) -> dict:
        """A shallow copy of the values as a dict."""
        return copy.copy(self._config)

    def to_json(self) -> str:
        """The values as a JSON string."""
        return json.dumps(self._config)

    def keys(self):
        return self._config.keys()

    def values(self):
        return self._config.values()

    def items(self):
        return self._config.items()

    def pop(self, *args):
        self._raise_if_frozen()
        return self._config.pop(*args)

    def update(self, *args, **kwargs):
        self._raise_if_frozen()
        return self._config.update(*args, **kwargs)

    def get(self, keyname, value=None):
        return self._config.get(keyname, value)

    def __setattr__(self, name, value):
        attrs = object.__getattribute__(self, "__attrs__")
        if attrs is None or name in attrs:
            return object.__setattr__(self, name, value)
        self._raise_if_frozen()
        self._config[name] = value

    def __getattr__(self, name):
        attrs = object.__getattribute__(self, "__attrs__")
        if attrs is None or name in attrs:
            return object.__getattribute__(self, name)
        if name in self._config:
            return self._config[name]
        msg = f"Unknown attribute: '{name}'."
        closest = difflib.get_close_matches(name, self._config.keys(), n=1, cutoff=0.7)
        if closest:
            msg += f" Did you mean '{closest[0]}'?"
        raise AttributeError(msg)

    def __setitem__(self, key, item):
        self._raise_if_frozen()
        self._config[key] = item

    def __getitem__(self, key):
        return self._config[key]

    def __delitem__(self, key):
        self._raise_if_frozen()
        del self._config[key]

    def __contains__(self, item):
        return item in self._config

    def __iter__(self):
        yield from sorted(self._config.keys())

    def __len__(self):
        return len(self._config)

    def __repr__(self):
        return f"<Config {self._config}>"
