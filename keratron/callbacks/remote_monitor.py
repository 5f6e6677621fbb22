"""`RemoteMonitor`: POST each epoch's logs to an HTTP server."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import warnings

import numpy as np

from keratron.callbacks.callback import Callback

__all__ = ["RemoteMonitor"]


class RemoteMonitor(Callback):
    """Sends the epoch logs to a server at the end of every epoch.

    The payload is `{"epoch": epoch, **logs}` as JSON: the whole request body when
    `send_as_json` is true, otherwise a form-encoded field named `field`. Uses the standard
    library (no `requests` needed). An unreachable server gives a warning, not an error.

    Args:
        root: the server's root URL. Defaults to "http://localhost:9000".
        path: the path appended to `root`. Defaults to "/publish/epoch/end/".
        field: the form field holding the JSON data. Defaults to "data".
        headers: optional dict of extra HTTP headers.
        send_as_json: send the payload as an `application/json` body.

    Example:
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))
        >>> monitor = keratron.callbacks.RemoteMonitor(root="http://localhost:9000")
        >>> history = model.fit(x, y, epochs=3, callbacks=[monitor], verbose=0)  # doctest: +SKIP
    """

    def __init__(
        self,
        root="http://localhost:9000",
        path="/publish/epoch/end/",
        field="data",
        headers=None,
        send_as_json=False,
    ):
        super().__init__()
        self.root = root
        self.path = path
        self.field = field
        self.headers = headers
        self.send_as_json = send_as_json

    def on_epoch_end(self, epoch, logs=None):
        send = {"epoch": epoch}
        for key, value in (logs or {}).items():
            # NumPy scalars are not JSON-serializable: unwrap them.
            send[key] = value.item() if isinstance(value, (np.ndarray, np.generic)) else value
        headers = dict(self.headers or {})
        if self.send_as_json:
            body = json.dumps(send).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        else:
            body = urllib.parse.urlencode({self.field: json.dumps(send)}).encode("utf-8")
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        request = urllib.request.Request(
            self.root + self.path, data=body, headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
        except urllib.error.HTTPError as e:
            warnings.warn(
                f"RemoteMonitor: the server at {self.root} answered HTTP {e.code} ({e.reason})",
                stacklevel=2,
            )
        except (urllib.error.URLError, OSError):
            warnings.warn(f"Could not reach RemoteMonitor root server at {self.root}", stacklevel=2)
