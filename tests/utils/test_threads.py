"""keratron's CPU thread policy: OpenMP's wait policy at import, thread counts in fit/predict.

Behaviour only, no timing. The import-time tests run in fresh interpreters (what matters is
what was imported before keratron); libgomp's `OMP_DISPLAY_ENV=VERBOSE` report says which
policy the runtime took: `GOMP_SPINCOUNT = '0'` is the passive policy, the default spins.
"""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

import keratron
from keratron.utils import threads

REPORT = "import os; print('ENV', os.environ.get('OMP_WAIT_POLICY'))"


@pytest.fixture(autouse=True)
def no_other_threads(monkeypatch):
    """Other processes' runnable threads read as none unless a test says otherwise: a test
    that stands in a free-core count is not also handed the machine's real load (a second
    stream opens where every core is busy)."""
    monkeypatch.setattr(threads, "_cached_other_threads", lambda: 0)


def run_fresh(code: str, **env) -> tuple[str, str]:
    """Runs `code` in a fresh interpreter; returns (OMP_WAIT_POLICY seen after the code,
    libgomp's GOMP_SPINCOUNT line)."""
    environ = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    environ.update(OMP_DISPLAY_ENV="VERBOSE", **env)
    proc = subprocess.run(
        [sys.executable, "-c", f"{code}; {REPORT}"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    policy = next(ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("ENV"))
    spin = next(ln.strip() for ln in proc.stderr.splitlines() if "GOMP_SPINCOUNT" in ln)
    return policy, spin


def test_import_leaves_openmp_default_unless_asked():
    # The passive policy costs a quiet machine a wake-up per parallel region: opt-in.
    policy, spin = run_fresh("import keratron")
    assert spin != "GOMP_SPINCOUNT = '0'"
    assert policy == "None"


def test_asked_import_first_makes_openmp_passive_and_leaves_environ_as_found():
    policy, spin = run_fresh("import keratron", KERATRON_OMP_PASSIVE="1")
    assert spin == "GOMP_SPINCOUNT = '0'"
    assert policy == "None"  # children of the process inherit the user's environment


def test_torch_imported_first_is_left_alone():
    policy, spin = run_fresh("import torch; import keratron", KERATRON_OMP_PASSIVE="1")
    assert spin != "GOMP_SPINCOUNT = '0'"
    assert policy == "None"


def test_user_policy_wins():
    policy, spin = run_fresh("import keratron", OMP_WAIT_POLICY="ACTIVE", KERATRON_OMP_PASSIVE="1")
    assert spin != "GOMP_SPINCOUNT = '0'"
    assert policy == "ACTIVE"


@pytest.fixture
def two_threads(torch_threads):
    torch_threads(2)
    yield
    keratron.config.set_adapt_threads(None)


def fit_recording_threads(epochs=1, fail=False) -> list[int]:
    """Fits a small model; returns torch's thread count seen at each batch end."""
    seen = []

    class Record(keratron.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(torch.get_num_threads())
            if fail:
                raise RuntimeError("stop")

    model = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 4), "float32"), np.zeros((8, 2), "float32")
    model.fit(x, y, batch_size=4, epochs=epochs, verbose=0, callbacks=[Record()])
    return seen


def test_fit_lowers_threads_to_free_cores_and_restores(monkeypatch, two_threads):
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    assert fit_recording_threads() == [1, 1]
    assert torch.get_num_threads() == 2


def test_restored_when_fit_raises(monkeypatch, two_threads):
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    with pytest.raises(RuntimeError, match="stop"):
        fit_recording_threads(fail=True)
    assert torch.get_num_threads() == 2


def test_never_raises_the_callers_count(monkeypatch, two_threads):
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 8)
    assert fit_recording_threads() == [2, 2]


def test_switch_turns_matching_off(monkeypatch, two_threads):
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    keratron.config.set_adapt_threads(False)
    assert fit_recording_threads() == [2, 2]


def test_predict_and_evaluate_restore(monkeypatch, two_threads):
    seen = []
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    model = keratron.Sequential([keratron.Input((4,)), keratron.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")

    class Record(keratron.callbacks.Callback):
        def on_predict_batch_end(self, batch, logs=None):
            seen.append(torch.get_num_threads())

        on_test_batch_end = on_predict_batch_end

    x = np.ones((4, 4), "float32")
    model.predict(x, verbose=0, callbacks=[Record()])
    model.evaluate(x, np.zeros((4, 2), "float32"), verbose=0, callbacks=[Record()])
    assert seen == [1, 1]
    assert torch.get_num_threads() == 2


def _record_batch_threads(model) -> list:
    """Wraps the model's predict function; returns the list of the names of the threads that
    run its batches, filled as they run."""
    ran = []
    step = model.make_predict_function()

    def recorded(batches):
        ran.append(threading.current_thread().name)
        return step(batches)

    model.predict_function = recorded
    return ran


def _conv_model():
    keratron.utils.set_random_seed(0)
    layers = keratron.layers
    model = keratron.Sequential(
        [
            keratron.Input((12, 12, 3)),
            layers.Conv2D(8, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(5, activation="softmax"),
        ]
    )
    return model


def test_predict_beside_busy_processes_runs_whole_batches_on_threads(monkeypatch, two_threads):
    """Where other processes hold cores, predict's batches go to four threads (twice the
    caller's two) that each take the next batch (on one intra-op thread each): the outputs are
    the serial ones, in order, the progress bar sees every batch in order, and torch's count
    is restored."""
    model = _conv_model()
    x = np.random.default_rng(0).standard_normal((70, 12, 12, 3)).astype("float32")
    quiet = model.predict(x, batch_size=8, verbose=0)
    ran = _record_batch_threads(model)
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    seen = []
    progress = keratron.callbacks.ProgbarLogger()
    monkeypatch.setattr(
        progress, "on_predict_batch_end", lambda batch, logs=None: seen.append(batch)
    )
    maps = []
    ordered_map = threads.ordered_map
    monkeypatch.setattr(
        threads,
        "ordered_map",
        lambda fn, items, workers: maps.append(workers) or ordered_map(fn, items, workers),
    )
    busy = model.predict(x, batch_size=8, verbose=0, callbacks=[progress])
    np.testing.assert_allclose(busy, quiet, rtol=1e-6, atol=1e-7)
    assert maps == [4]  # twice the caller's two threads
    assert len(ran) == 9 and all(name.startswith("keratron-batch") for name in ran)
    assert seen == list(range(9))
    assert torch.get_num_threads() == 2 and threads.batch_workers() == 1


def test_batch_workers_are_twice_the_callers_count_only_where_it_was_lowered(
    monkeypatch, two_threads
):
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    assert threads.batch_workers() == 1
    with threads.matched_to_free_cores():
        assert torch.get_num_threads() == 1 and threads.batch_workers() == 4
    assert threads.batch_workers() == 1
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 2)
    with threads.matched_to_free_cores():
        assert torch.get_num_threads() == 2 and threads.batch_workers() == 1


def test_predict_keeps_one_thread_of_batches_with_a_batch_callback_or_a_quiet_machine(
    monkeypatch, two_threads
):
    model = _conv_model()
    x = np.zeros((24, 12, 12, 3), "float32")
    ran = _record_batch_threads(model)
    order = []

    class Record(keratron.callbacks.Callback):
        def on_predict_batch_begin(self, batch, logs=None):
            order.append(("begin", batch, len(ran)))

    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
    model.predict(x, batch_size=8, verbose=0, callbacks=[Record()])
    # Each begin hook runs before its batch: the loop stays on the caller's thread.
    assert order == [("begin", 0, 0), ("begin", 1, 1), ("begin", 2, 2)]
    assert set(ran) == {threading.current_thread().name}
    ran.clear()
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 2)
    model.predict(x, batch_size=8, verbose=0)
    assert set(ran) == {threading.current_thread().name}


def test_predict_of_dependent_batches_stays_on_the_callers_thread(monkeypatch, two_threads):
    """A stateful RNN carries its state from batch to batch, and an overridden predict_step may
    do anything: their batches run in order on the caller's thread, with the quiet results."""
    layers = keratron.layers
    x = np.random.default_rng(1).standard_normal((16, 5, 3)).astype("float32")

    def stateful():
        keratron.utils.set_random_seed(0)
        return keratron.Sequential(
            [keratron.Input((5, 3), batch_size=4), layers.LSTM(6, stateful=True), layers.Dense(2)]
        )

    class Custom(keratron.Model):
        def predict_step(self, data):
            return super().predict_step(data)

    def custom():
        keratron.utils.set_random_seed(0)
        inputs = keratron.Input((5, 3))
        return Custom(inputs, layers.Dense(2)(layers.Flatten()(inputs)))

    for build in (stateful, custom):
        quiet = build().predict(x, batch_size=4, verbose=0)
        monkeypatch.setattr(threads, "_cached_free_cores", lambda: 1)
        model = build()
        ran = _record_batch_threads(model)
        busy = model.predict(x, batch_size=4, verbose=0)
        monkeypatch.undo()
        assert set(ran) == {threading.current_thread().name}, build.__name__
        np.testing.assert_allclose(busy, quiet, rtol=1e-6, atol=1e-7)


def test_ordered_map_keeps_order_raises_and_bounds_what_is_in_flight():
    started = []

    def slow_then_fast(i):
        started.append(i)
        time.sleep(0.02 if i % 3 == 0 else 0.0)
        return i * i, torch.get_num_threads()

    got = list(threads.ordered_map(slow_then_fast, range(10), 2))
    assert [v for v, _ in got] == [i * i for i in range(10)]
    assert {n for _, n in got} == {1}
    # The workers' count does not reach threads started later.
    later = []
    thread = threading.Thread(target=lambda: later.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert later == [torch.get_num_threads()]

    def failing(i):
        if i == 3:
            raise ValueError("batch 3")
        return i

    with pytest.raises(ValueError, match="batch 3"):
        list(threads.ordered_map(failing, range(100), 2))

    def items():
        for i in range(1000):
            produced.append(i)
            yield i

    produced = []
    results = threads.ordered_map(lambda i: i, items(), 2)
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    assert len(produced) <= 3 + 4  # at most two a worker ahead of what was taken
    results.close()


def test_free_cores_counts_other_processes(monkeypatch):
    monkeypatch.setattr(threads, "_allowed_cores", lambda: 4)
    monkeypatch.setattr(threads, "_own_running_threads", lambda: 1)
    monkeypatch.setattr(threads, "_running_threads", lambda: 3)  # 2 other runnable threads
    assert threads.free_cores() == 2
    monkeypatch.setattr(threads, "_running_threads", lambda: 9)
    assert threads.free_cores() == 1  # never below one


def test_free_cores_reads_this_machine():
    free = threads.free_cores()
    if not os.path.exists("/proc/loadavg"):
        assert free is None
    else:
        assert 1 <= free <= len(os.sched_getaffinity(0))


def test_a_thread_runnable_in_one_reading_only_leaves_the_cores_free(monkeypatch):
    # A process starting or exiting is runnable for a moment: it must not halve the threads
    # of a whole call (with the median of the readings it did, in ~half of the runs of a
    # quiet machine); a busy process, runnable in every reading, still counts.
    monkeypatch.setattr(threads.time, "sleep", lambda s: None)
    monkeypatch.setattr(threads, "_allowed_cores", lambda: 2)
    monkeypatch.setattr(threads, "_own_running_threads", lambda: 1)
    seen = iter([2, 2, 1, 2])
    monkeypatch.setattr(threads, "_running_threads", lambda: next(seen))
    assert threads.free_cores() == 2
    monkeypatch.setattr(threads, "_running_threads", lambda: 2)  # one busy process
    assert threads.free_cores() == 1


def test_an_own_worker_that_sleeps_during_a_reading_is_not_another_process(monkeypatch):
    # The worker is runnable when the machine's count is read and asleep by the time this
    # process's threads are read (it wakes again between readings): still this process's own
    # thread, not another process's (counted as one, it lowered a quiet machine to 1 thread).
    awake = [True]

    def running():
        awake[0] = False  # the worker finishes its spin just after this reading
        return 2

    monkeypatch.setattr(threads.time, "sleep", lambda s: awake.__setitem__(0, True))
    monkeypatch.setattr(threads, "_allowed_cores", lambda: 2)
    monkeypatch.setattr(threads, "_own_running_threads", lambda: 2 if awake[0] else 1)
    monkeypatch.setattr(threads, "_running_threads", running)
    assert threads.free_cores() == 2


_SEEN_THREADS: list = []


def _record_threads(x):
    if x.device.type != "meta":  # not while tracing infers its shape
        _SEEN_THREADS.append(torch.get_num_threads())
    return x * 2.0


_RECORD_THREADS = keratron.autodiff.primitive.Primitive(
    "test_record_threads", _record_threads, effect=True
)


def _threads_in_replay(f, shape) -> int:
    x = np.ones(shape, "float32")
    f(x)  # traces (and replays)
    _SEEN_THREADS.clear()
    f(x)
    (seen,) = _SEEN_THREADS
    return seen


def test_a_plan_of_small_values_replays_on_one_thread(two_threads):
    # Every value under 4,096 elements: one thread inside the replay, the caller's count
    # after; a value of 4,096 elements or more, or the switch off, keeps the caller's count.
    f = keratron.function(lambda x: _RECORD_THREADS.bind(x) + 1.0)
    assert _threads_in_replay(f, (63, 65)) == 1
    assert torch.get_num_threads() == 2
    assert _threads_in_replay(f, (64, 64)) == 2
    keratron.config.set_adapt_threads(False)
    assert _threads_in_replay(f, (63, 65)) == 2
    assert torch.get_num_threads() == 2


def test_a_small_training_step_runs_on_one_thread_and_restores(two_threads, monkeypatch):
    monkeypatch.setattr(threads, "_cached_free_cores", lambda: 8)  # whatever else runs
    assert fit_recording_threads() == [2, 2]  # read between steps, outside the replays
    seen = []

    class RecordLayer(keratron.layers.Layer):
        def call(self, x):
            return _RECORD_THREADS.bind(x)

    model = keratron.Sequential([keratron.Input((4,)), RecordLayer(), keratron.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    _SEEN_THREADS.clear()
    model.fit(np.ones((8, 4), "float32"), np.zeros((8, 2), "float32"), batch_size=4, verbose=0)
    seen = list(_SEEN_THREADS)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2
