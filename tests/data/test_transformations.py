"""Dataset transformations: semantics as tf.data defines them."""

import collections
import gc
import threading
import time

import numpy as np
import pytest

import keratron as kt
from keratron.data import AUTOTUNE, Dataset, TensorSpec

INF, UNKNOWN = kt.data.INFINITE_CARDINALITY, kt.data.UNKNOWN_CARDINALITY


def ints(ds):
    return [int(v) for v in ds.as_numpy_iterator()]


def batches(ds):
    return [b.tolist() for b in ds.as_numpy_iterator()]


# ------------------------------------------------------------------------------------ map
def test_map_unpacks_tuples_into_arguments():
    ds = Dataset.from_tensor_slices((np.arange(3), np.arange(3) * 10))
    seen = []

    def fn(x, y):
        seen.append((type(x), type(y)))
        return x + y

    assert ints(ds.map(fn)) == [0, 11, 22]
    assert all(t == (kt.Tensor, kt.Tensor) for t in seen)


def test_map_passes_dicts_and_namedtuples_as_one_argument():
    ds = Dataset.from_tensor_slices({"a": [1, 2], "b": [3, 4]})
    assert ints(ds.map(lambda d: d["a"] * d["b"])) == [3, 8]
    Pair = collections.namedtuple("Pair", ["x", "y"])
    pairs = Dataset.from_tensor_slices(Pair([1, 2], [5, 6]))
    assert ints(pairs.map(lambda p: p.y - p.x)) == [4, 4]


def test_map_list_result_becomes_tuple_of_components():
    ds = Dataset.range(3).map(lambda x: [x, x * 2.0])
    out = list(ds.as_numpy_iterator())
    assert isinstance(out[0], tuple) and out[2] == (2, 4.0)
    assert ds.element_spec == (TensorSpec((), "int64"), TensorSpec((), "float32"))


def test_map_element_spec_is_traced_without_running():
    calls = []

    def fn(x):
        calls.append(x.shape)
        return kt.ops.reshape(x, (-1, 2)), kt.ops.sum(x)

    ds = Dataset.from_tensor_slices(np.zeros((5, 6), "float32")).map(fn)
    assert ds.element_spec == (TensorSpec((3, 2), "float32"), TensorSpec((), "float32"))
    assert len(calls) == 1  # one shape-only trace: all input dimensions are known
    batched = Dataset.from_tensor_slices(np.zeros((5, 6), "float32")).batch(2)
    spec = batched.map(lambda b: kt.ops.concatenate([b, b], axis=1)).element_spec
    assert spec == TensorSpec((None, 12), "float32")


def test_map_element_spec_falls_back_to_running_on_first_element():
    # `int(x)` needs a value, so the function is run once on the first element instead.
    ds = Dataset.range(1, 4).map(lambda x: kt.ops.ones((int(x), 2)))
    assert ds.element_spec == TensorSpec((None, None), "float32")
    assert [v.shape for v in ds.as_numpy_iterator()] == [(1, 2), (2, 2), (3, 2)]


@pytest.mark.parametrize("calls", [2, AUTOTUNE])
def test_parallel_map_keeps_input_order(calls):
    delays = [0.03, 0.0, 0.02, 0.0, 0.01, 0.0, 0.0, 0.02]

    def slow(i):
        time.sleep(delays[int(i)])
        return i * 10

    ds = Dataset.range(len(delays)).map(slow, num_parallel_calls=calls)
    assert ints(ds) == [10 * i for i in range(len(delays))]
    assert ints(ds) == ints(ds)  # and on a second pass


def test_parallel_map_runs_on_threads_and_nondeterministic_yields_every_element():
    threads = set()
    first_received = threading.Event()

    def fn(i):
        threads.add(threading.current_thread().name)
        if int(i) == 0:
            # Element 0 cannot finish before the consumer has received another element (the
            # timeout only keeps an order-preserving regression from hanging the suite).
            first_received.wait(timeout=30)
        return i

    it = iter(Dataset.range(12).map(fn, num_parallel_calls=3, deterministic=False))
    first = int(next(it))
    first_received.set()
    out = [first] + [int(x) for x in it]
    assert sorted(out) == list(range(12))
    assert all(name.startswith("keratron-data-map") for name in threads)
    # The slow first element was overtaken by a faster one.
    assert out[0] != 0


def test_map_exception_propagates_and_map_runs_under_cpu_scope():
    def fn(x):
        if int(x) == 2:
            raise RuntimeError("bad element 2")
        return x + kt.ops.ones(())  # a tensor made inside the function lives on the CPU

    it = iter(Dataset.range(4).map(fn))
    assert [float(next(it)) for _ in range(2)] == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="bad element 2"):
        next(it)
    with pytest.raises(TypeError, match="must be callable"):
        Dataset.range(2).map(3)


# -------------------------------------------------------------------- filter / flat_map
def test_filter_keeps_elements_where_predicate_is_true():
    ds = Dataset.from_tensor_slices((np.arange(6), np.arange(6) * 2))
    kept = ds.filter(lambda x, y: x % 2 == 1)
    assert [(int(a), int(b)) for a, b in kept.as_numpy_iterator()] == [(1, 2), (3, 6), (5, 10)]
    assert int(kept.cardinality()) == UNKNOWN
    assert ints(Dataset.range(4).filter(lambda x: int(x) > 1)) == [2, 3]
    with pytest.raises(TypeError, match="scalar boolean"):
        list(Dataset.range(3).filter(lambda x: x))


def test_flat_map_chains_datasets():
    ds = Dataset.from_tensor_slices(np.arange(6).reshape(3, 2))
    flat = ds.flat_map(Dataset.from_tensor_slices)
    assert ints(flat) == [0, 1, 2, 3, 4, 5]
    assert flat.element_spec == TensorSpec((), "int64")
    repeated = Dataset.range(1, 4).flat_map(lambda x: Dataset.from_tensors(x).repeat(x))
    assert ints(repeated) == [1, 2, 2, 3, 3, 3]
    with pytest.raises(TypeError, match="must return a Dataset"):
        list(Dataset.range(2).flat_map(lambda x: x))


def test_interleave_matches_tf_documented_order():
    ds = Dataset.range(1, 6).interleave(
        lambda x: Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4
    )
    expected = [1] * 4 + [2] * 4 + [1] * 2 + [2] * 2 + [3] * 4 + [4] * 4
    expected += [3] * 2 + [4] * 2 + [5] * 6
    assert ints(ds) == expected
    one = Dataset.range(3).interleave(lambda x: Dataset.range(x), cycle_length=1)
    assert ints(one) == [0, 0, 1]


# ------------------------------------------------------------------------------- batching
def test_batch_and_drop_remainder_and_element_spec():
    ds = Dataset.from_tensor_slices((np.arange(10).reshape(5, 2), np.arange(5.0)))
    out = list(ds.batch(2).as_numpy_iterator())
    assert [b[0].shape for b in out] == [(2, 2), (2, 2), (1, 2)]
    np.testing.assert_array_equal(out[2][1], [4.0])
    assert ds.batch(2).element_spec == (
        TensorSpec((None, 2), "int64"),
        TensorSpec((None,), "float64"),
    )
    dropped = ds.batch(2, drop_remainder=True)
    assert dropped.element_spec[0] == TensorSpec((2, 2), "int64")
    assert len(list(dropped)) == 2
    assert int(ds.batch(2).cardinality()) == 3 and int(dropped.cardinality()) == 2
    # The sliced fast path and the element-by-element path give the same batches.
    slow = ds.map(lambda a, b: (a, b)).batch(2)
    for a, b in zip(ds.batch(2).as_numpy_iterator(), slow.as_numpy_iterator()):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="must be positive"):
        ds.batch(0)


def test_batch_rejects_different_shapes():
    ds = Dataset.range(1, 4).map(lambda x: kt.ops.ones((int(x),)))
    with pytest.raises(ValueError, match="different shapes in component 0"):
        list(ds.batch(2))


def test_repeat_then_batch_versus_batch_then_repeat():
    ds = Dataset.range(5)
    assert batches(ds.repeat(2).batch(3)) == [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4]]
    assert batches(ds.batch(3).repeat(2)) == [[0, 1, 2], [3, 4], [0, 1, 2], [3, 4]]
    assert int(ds.repeat(2).batch(3).cardinality()) == 4
    assert int(ds.batch(3).repeat(2).cardinality()) == 4


def test_padded_batch_shapes_and_values():
    ds = Dataset.range(1, 5).map(lambda x: kt.ops.cast(kt.ops.arange(int(x)) + 1, "int32"))
    out = batches(ds.padded_batch(2))
    assert out == [[[1, 0], [1, 2]], [[1, 2, 3, 0], [1, 2, 3, 4]]]
    fixed = ds.padded_batch(3, padded_shapes=(5,), padding_values=-1)
    assert batches(fixed) == [[[1, -1, -1, -1, -1], [1, 2, -1, -1, -1], [1, 2, 3, -1, -1]],
                              [[1, 2, 3, 4, -1]]]  # fmt: skip
    assert fixed.element_spec == TensorSpec((None, 5), "int32")
    assert ds.padded_batch(2, drop_remainder=True).element_spec == TensorSpec((2, None), "int32")
    with pytest.raises(ValueError, match="smaller size than the input element"):
        list(ds.padded_batch(4, padded_shapes=(3,)))


def test_padded_batch_per_component_shapes_values_and_strings():
    def gen():
        yield [1.0], "a", 7
        yield [1.0, 2.0, 3.0], "b", 8

    sig = (TensorSpec((None,), "float32"), TensorSpec((), "string"), TensorSpec((), "int32"))
    ds = Dataset.from_generator(gen, output_signature=sig)
    x, s, n = next(
        iter(ds.padded_batch(2, padded_shapes=([4], [], []), padding_values=(9.0, b"", 0)))
    )
    np.testing.assert_array_equal(x.numpy(), [[1, 9, 9, 9], [1, 2, 3, 9]])
    assert s.tolist() == [b"a", b"b"] and n.numpy().tolist() == [7, 8]
    words = Dataset.from_generator(
        lambda: iter([["a"], ["b", "c"]]), output_signature=TensorSpec((None,), "string")
    )
    padded = next(iter(words.padded_batch(2, padding_values="<pad>")))
    assert padded.tolist() == [[b"a", b"<pad>"], [b"b", b"c"]]
    with pytest.raises(ValueError, match="not compatible with the shape"):
        _ = (
            Dataset.from_tensor_slices(np.zeros((4, 3)))
            .padded_batch(2, padded_shapes=(2, 2))
            .element_spec
        )
    with pytest.raises(ValueError, match="padded shape"):
        list(Dataset.from_tensor_slices(np.zeros((4, 3))).padded_batch(2, padded_shapes=(2, 2)))


def test_unbatch_inverts_batch():
    x = np.arange(14).reshape(7, 2)
    ds = Dataset.from_tensor_slices((x, x[:, 0] * 1.0)).batch(3).unbatch()
    out = list(ds.as_numpy_iterator())
    np.testing.assert_array_equal(np.stack([o[0] for o in out]), x)
    assert ds.element_spec == (TensorSpec((2,), "int64"), TensorSpec((), "float64"))
    with pytest.raises(ValueError, match="scalar components"):
        _ = Dataset.range(3).unbatch().element_spec
    with pytest.raises(ValueError, match="scalar components"):
        list(Dataset.range(3).unbatch())


# -------------------------------------------------------------------------------- shuffle
def test_shuffle_buffer_of_one_keeps_order():
    assert ints(Dataset.range(20).shuffle(1, seed=3)) == list(range(20))


def test_shuffle_draws_first_output_from_first_buffer_size_elements():
    firsts = set()
    for seed in range(60):
        ds = Dataset.range(50).shuffle(4, seed=seed)
        out = ints(ds)
        assert sorted(out) == list(range(50))  # every element exactly once
        # After emitting k elements, at most buffer_size + k - 1 inputs have been read.
        assert all(v < 4 + k for k, v in enumerate(out))
        firsts.add(out[0])
    assert firsts == {0, 1, 2, 3}


def test_shuffle_large_buffer_is_roughly_uniform():
    counts = np.zeros((5, 5))
    for seed in range(400):
        for pos, v in enumerate(ints(Dataset.range(5).shuffle(10, seed=seed))):
            counts[v, pos] += 1
    assert counts.min() > 50 and counts.max() < 115  # 80 expected per cell


def test_shuffle_reshuffles_each_iteration_and_fixed_seed_repeats():
    ds = Dataset.range(30).shuffle(30, seed=7)
    first, second = ints(ds), ints(ds)
    assert sorted(first) == sorted(second) == list(range(30))
    assert first != second
    # The sequence of orders depends only on the seed.
    again = Dataset.range(30).shuffle(30, seed=7)
    assert [ints(again), ints(again)] == [first, second]
    fixed = Dataset.range(30).shuffle(30, seed=7, reshuffle_each_iteration=False)
    assert ints(fixed) == ints(fixed) == ints(Dataset.range(30).shuffle(30, seed=7))
    assert ints(Dataset.range(30).shuffle(30, seed=8)) != first


def test_shuffle_reshuffles_across_repeat_epochs():
    out = ints(Dataset.range(20).shuffle(20, seed=1).repeat(2))
    assert sorted(out[:20]) == sorted(out[20:]) == list(range(20))
    assert out[:20] != out[20:]


def test_unseeded_shuffle_follows_the_global_seed_and_leaves_global_rngs_alone():
    import torch

    kt.utils.set_random_seed(5)
    a = ints(Dataset.range(30).shuffle(30))
    kt.utils.set_random_seed(5)
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()[1].copy()
    b_ds = Dataset.range(30).shuffle(30)
    b = ints(b_ds)
    assert a == b and a != list(range(30))
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(np.random.get_state()[1], numpy_state)
    fixed = Dataset.range(30).shuffle(30, reshuffle_each_iteration=False)
    assert ints(fixed) == ints(fixed)


# ------------------------------------------------------------------- take / skip / repeat
def test_take_skip_repeat_and_cardinality():
    ds = Dataset.range(6)
    assert ints(ds.take(2)) == [0, 1] and ints(ds.take(-1)) == list(range(6))
    assert ints(ds.skip(4)) == [4, 5] and ints(ds.skip(-1)) == []
    assert ints(ds.repeat(2).take(8)) == [0, 1, 2, 3, 4, 5, 0, 1]
    assert ints(ds.repeat().skip(5).take(3)) == [5, 0, 1]
    assert ints(Dataset.range(0).repeat()) == []  # repeating nothing ends
    cards = {
        "take": ds.take(2),
        "take_inf": ds.repeat().take(4),
        "skip": ds.skip(10),
        "skip_inf": ds.repeat().skip(3),
        "repeat": ds.repeat(3),
        "repeat_inf": ds.repeat(),
        "repeat_0": ds.repeat(0),
        "take_unknown": ds.filter(lambda x: True).take(2),
    }
    got = {k: int(v.cardinality()) for k, v in cards.items()}
    assert got == {
        "take": 2,
        "take_inf": 4,
        "skip": 0,
        "skip_inf": INF,
        "repeat": 18,
        "repeat_inf": INF,
        "repeat_0": 0,
        "take_unknown": UNKNOWN,
    }


def test_enumerate():
    out = list(Dataset.from_tensor_slices(["a", "b"]).enumerate(start=3).as_numpy_iterator())
    assert out == [(3, b"a"), (4, b"b")]
    assert Dataset.range(2).enumerate().element_spec[0] == TensorSpec((), "int64")


# -------------------------------------------------------------------------------- cache
def test_cache_in_memory_replays_first_complete_pass():
    calls = []

    def fn(x):
        calls.append(int(x))
        return x * 2

    ds = Dataset.range(4).map(fn).cache()
    assert calls == []
    it = iter(ds)
    next(it)
    del it  # a partial pass caches nothing
    assert ints(ds) == [0, 2, 4, 6]
    n_calls = len(calls)
    assert ints(ds) == [0, 2, 4, 6]
    assert len(calls) == n_calls  # the second full pass came from the cache


def test_cache_of_shuffled_dataset_freezes_its_order():
    ds = Dataset.range(20).shuffle(20, seed=2).cache()
    assert ints(ds) == ints(ds)


def test_cache_to_file_is_read_back(tmp_path):
    path = str(tmp_path / "cache.npz")
    calls = []

    def gen():
        calls.append(1)
        yield np.arange(3, dtype="float32"), "x"
        yield np.arange(2, dtype="float32"), "yz"

    sig = (TensorSpec((None,), "float32"), TensorSpec((), "string"))
    ds = Dataset.from_generator(gen, output_signature=sig).cache(path)
    first = list(ds.as_numpy_iterator())
    # A new dataset over the same file reads it without calling the generator.
    again = Dataset.from_generator(gen, output_signature=sig).cache(path)
    second = list(again.as_numpy_iterator())
    assert calls == [1]
    assert [(a.tolist(), s) for a, s in second] == [(a.tolist(), s) for a, s in first]
    assert second[0][0].dtype == np.float32 and second[1][1] == b"yz"
    (tmp_path / "bad").write_bytes(b"not a cache")
    with pytest.raises(ValueError, match="is not a dataset cache"):
        list(Dataset.range(2).cache(str(tmp_path / "bad")))


# ------------------------------------------------------------------------------ prefetch
def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "keratron-data-prefetch"]


def test_prefetch_yields_everything_in_order():
    ds = Dataset.range(50).map(lambda x: x + 1).prefetch(3)
    assert ints(ds) == list(range(1, 51))
    assert ints(Dataset.range(5).prefetch(0)) == list(range(5))
    assert ints(Dataset.range(5).prefetch(AUTOTUNE)) == list(range(5))


def test_prefetch_propagates_exception_raised_in_map():
    def fn(x):
        if int(x) == 3:
            raise ValueError("cannot map 3")
        return x

    it = iter(Dataset.range(10).map(fn).prefetch(2))
    assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="cannot map 3"):
        next(it)


def test_prefetch_thread_stops_when_iterator_is_dropped():
    before = len(_prefetch_threads())
    it = iter(Dataset.range(10**6).prefetch(2))
    next(it)
    assert len(_prefetch_threads()) == before + 1
    del it
    gc.collect()
    deadline = time.time() + 5
    while len(_prefetch_threads()) > before and time.time() < deadline:
        time.sleep(0.02)
    assert len(_prefetch_threads()) == before


def test_prefetch_runs_ahead_of_the_consumer():
    produced, overruns = [], []
    requested = [0]  # next() calls begun by the consumer
    sixth_produced = threading.Event()

    def fn(x):
        x = int(x)
        # Element x is made only after x - 1 went into the 4-slot buffer, which needs the
        # consumer to have taken x - 4 out: never more than 4 + 1 ahead of the requests.
        if x > requested[0] + 4:
            overruns.append((x, requested[0]))
        produced.append(x)
        if x == 5:
            sixth_produced.set()
        return x

    it = iter(Dataset.range(20).map(fn).prefetch(4))
    requested[0] += 1
    assert int(next(it)) == 0
    assert sixth_produced.wait(timeout=30)
    # One element consumed, 4 waiting in the buffer, one more held by the producer's `put`.
    assert len(produced) == 6
    for expected in range(1, 20):
        requested[0] += 1
        assert int(next(it)) == expected
    assert overruns == []
    assert produced == list(range(20))
