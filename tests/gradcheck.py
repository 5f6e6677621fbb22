"""Gradient checking: random-direction central differences, and a torch.autograd oracle.

`check_grads(fn, args)` compares, for a random cotangent u and random input directions v,
the reverse-mode value <u, J v> = sum_i <grad_i, v_i> with the central difference
<u, (f(x + eps v) - f(x - eps v)) / (2 eps)>, in float64. `check_against_torch` compares
each input's gradient elementwise with torch.autograd on the same inputs (tests only: the
library itself never uses torch.autograd).
"""

from __future__ import annotations

import numpy as np
import torch

from keratron.autodiff import tree
from keratron.autodiff.tape import GradientTape
from keratron.autodiff.tensor import Tensor, convert_to_tensor


def _flat_outputs(out) -> list[Tensor]:
    return [o for o in tree.flatten(out) if isinstance(o, Tensor) and o._value.is_floating_point()]


def _vjp(fn, args, cotangents, argnums):
    xs = [convert_to_tensor(a) for a in args]
    with GradientTape(persistent=True) as tape:
        for i in argnums:
            tape.watch(xs[i])
        outs = _flat_outputs(fn(*xs))
    grads = tape.gradient(outs, [xs[i] for i in argnums], output_gradients=cotangents(outs))
    return outs, grads


def check_grads(fn, args, argnums=None, eps=1e-6, rtol=1e-5, atol=1e-7, seed=0, order=1):
    """Asserts reverse-mode gradients of `fn` at float64 `args` match central differences.

    With order=2, also checks the gradient of <u, grad> (second derivatives through a nested
    tape) the same way.
    """
    rng = np.random.default_rng(seed)
    args = [np.asarray(a) if not isinstance(a, Tensor) else a.numpy() for a in args]
    if argnums is None:
        argnums = [i for i, a in enumerate(args) if a.dtype.kind == "f"]
    for a in (args[i] for i in argnums):
        if a.dtype != np.float64:
            raise ValueError("check_grads: differentiable arguments must be float64.")
    outs0 = _flat_outputs(fn(*[convert_to_tensor(a) for a in args]))
    us = [rng.standard_normal(o.shape) for o in outs0]
    _, grads = _vjp(fn, args, lambda outs: [convert_to_tensor(u) for u in us], argnums)
    vs = [rng.standard_normal(args[i].shape) for i in argnums]
    analytic = sum(
        float(np.sum((np.zeros_like(v) if g is None else g.numpy()) * v)) for g, v in zip(grads, vs)
    )

    def f_at(sign):
        shifted = list(args)
        for i, v in zip(argnums, vs):
            shifted[i] = np.asarray(args[i] + sign * eps * v)  # 0-d stays an array (float64)
        outs = _flat_outputs(fn(*[convert_to_tensor(a) for a in shifted]))
        return sum(float(np.sum(o.numpy() * u)) for o, u in zip(outs, us))

    numeric = (f_at(1.0) - f_at(-1.0)) / (2 * eps)
    if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
        raise AssertionError(
            f"check_grads({getattr(fn, '__name__', fn)}): reverse mode gives {analytic!r}, "
            f"central differences give {numeric!r}"
        )
    if order >= 2:
        u_t = [convert_to_tensor(u) for u in us]

        def grad_fn(*xs):
            inner_args = list(xs)
            with GradientTape() as tape:
                for i in argnums:
                    tape.watch(inner_args[i])
                outs = _flat_outputs(fn(*inner_args))
            g = tape.gradient(outs, [inner_args[i] for i in argnums], output_gradients=u_t)
            return [gi for gi in g if gi is not None]

        check_grads(grad_fn, args, argnums, eps, rtol * 10, atol * 10, seed + 1, order - 1)


def check_against_torch(fn, torch_fn, args, argnums=None, rtol=1e-6, atol=1e-8, seed=0):
    """Asserts values and gradients of `fn` equal those of `torch_fn` under torch.autograd."""
    rng = np.random.default_rng(seed)
    args = [np.asarray(a) for a in args]
    if argnums is None:
        argnums = [i for i, a in enumerate(args) if a.dtype.kind == "f"]
    outs, _ = _vjp(fn, args, lambda outs: None, [])
    us = [rng.standard_normal(o.shape) for o in outs]
    outs, grads = _vjp(fn, args, lambda o: [convert_to_tensor(u) for u in us], argnums)
    targs = [torch.tensor(a, requires_grad=i in argnums) for i, a in enumerate(args)]
    touts = [
        t
        for t in tree.flatten(torch_fn(*targs))
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    ]
    if len(touts) != len(outs):
        raise AssertionError(f"{len(outs)} outputs vs torch's {len(touts)}")
    for o, t in zip(outs, touts):
        np.testing.assert_allclose(
            o.numpy(), t.detach().numpy(), rtol=rtol, atol=atol, err_msg="value"
        )
    loss = sum((t * torch.tensor(u)).sum() for t, u in zip(touts, us))
    tgrads = torch.autograd.grad(loss, [targs[i] for i in argnums], allow_unused=True)
    for i, g, tg in zip(argnums, grads, tgrads):
        expected = np.zeros(args[i].shape) if tg is None else tg.numpy()
        got = np.zeros(args[i].shape) if g is None else g.numpy()
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=f"grad of arg {i}")
