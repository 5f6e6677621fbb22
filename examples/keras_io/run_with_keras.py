"""Runs a script of this folder under real Keras 3 (torch backend), to record its figure.

The only change made to the script is its import: `import keratron as keras` becomes
`import keras` (and `from keratron import X` becomes `from keras import X`;
`keratron.compat.v2` becomes `tensorflow`, whose scripts then run on Keras's TensorFlow backend).

    .venv/bin/python examples/keras_io/run_with_keras.py sequential_model.py
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def keras_source(source):
    """The script's source with keratron's imports switched to Keras's."""
    source = source.replace("import keratron.compat.v2 as tf", "import tensorflow as tf")
    source = source.replace("import keratron as keras", "import keras")
    return re.sub(r"^from keratron(\.\w+)* import", r"from keras\1 import", source, flags=re.M)


def run(name, timeout=600):
    """Runs `name` under Keras; returns the completed process (text output)."""
    source = keras_source((HERE / name).read_text())
    env = dict(os.environ)
    env["KERAS_BACKEND"] = "tensorflow" if "import tensorflow as tf" in source else "torch"
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / name
        script.write_text(source)
        return subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


if __name__ == "__main__":
    for name in sys.argv[1:]:
        proc = run(name)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr[-3000:] if proc.returncode else "")
