"""Runs a program of this folder under real TensorFlow 2, to record what it prints.

The only change made to the program is its imports: `import keratron.compat.v2 as tf` becomes
`import tensorflow as tf` (its `tf.keras` is then Keras 3 on the TensorFlow backend), and
`import keratron as keras` / `from keratron import X` become Keras's.

    .venv/bin/python examples/tf2/run_with_tensorflow.py eager_basics.py
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def tensorflow_source(source):
    """The program's source with keratron's imports switched to TensorFlow's and Keras's."""
    source = source.replace("import keratron.compat.v2 as tf", "import tensorflow as tf")
    source = source.replace("import keratron as keras", "import keras")
    return source.replace("from keratron import ", "from keras import ")


def run(name, timeout=600):
    """Runs `name` under TensorFlow in a scratch directory; returns the completed process."""
    source = tensorflow_source((HERE / name).read_text())
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    env.setdefault("OMP_NUM_THREADS", "1")
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
