"""Recurrences over a whole sequence: the `lstm` and `gru` primitives.

Each layer hands its input projection `x @ kernel + bias` in as one precomputed tensor
`x_proj` of shape (batch, time, gates * units), so the primitive's time loop only does the
recurrent matmul and the gate math per step. The forward saves the gate activations (and the
cells, or the recurrent candidate term) as extra residual outputs in time-major layout; the
backward is a dedicated primitive (`lstm_grad`, `gru_grad`) that runs backpropagation
through time with torch, no autograd. Gate orders are Keras's: i, f, c, o for LSTM and
z, r, h for GRU. Masking and `reverse` (Keras's `go_backwards`) follow Keras 3's RNN loop:
at a masked step the state carries over, and the output repeats the previous step's output
(zeros before the first one), or is zero with `zero_output_for_mask=True`; with `reverse`
the sequence is processed last step first and outputs come back in processed order.

Higher derivatives: `lstm_grad` and `gru_grad` have no VJP of their own. When an outer
`GradientTape` is recording while the gradient is taken (a gradient of a gradient), the VJP
instead differentiates the same recurrence written step by step with keratron ops, so the
backward pass is itself recorded and differentiable; first-order gradients always use the
fused backward.
"""

from __future__ import annotations

import torch

from keratron import config
from keratron.autodiff.primitive import device_route
from keratron.ops._core import (
    Primitive,
    Tensor,
    as_tensor,
    backward_is_recorded,
    composite_vjp,
    on_device,
)
from keratron.ops.elementwise import (
    add,
    cast,
    clip,
    multiply,
    relu,
    sigmoid_p,
    subtract,
    tanh,
    where,
    zeros_like_p,
)
from keratron.ops.linalg import fused_matmul, matmul
from keratron.ops.shaping import expand_dims, stack

__all__ = ["lstm", "lstm_sequence", "gru"]


def _hard_sigmoid_grad(y):
    # d/dx clip(x / 6 + 1/2, 0, 1) is 1/6 strictly inside (-3, 3), i.e. where 0 < y < 1.
    return ((y > 0) & (y < 1)).to(y.dtype) / 6.0


# name -> (activation returning a fresh tensor, the same applied in place to a view,
#          derivative expressed through the activation's output, or None where it is 1).
_ACTIVATIONS = {
    "tanh": (torch.tanh, torch.Tensor.tanh_, lambda y: 1.0 - y * y),
    "sigmoid": (torch.sigmoid, torch.Tensor.sigmoid_, lambda y: y * (1.0 - y)),
    "relu": (torch.relu, torch.Tensor.relu_, lambda y: (y > 0).to(y.dtype)),
    "hard_sigmoid": (
        torch.nn.functional.hardsigmoid,
        lambda v: torch.nn.functional.hardsigmoid(v, inplace=True),
        _hard_sigmoid_grad,
    ),
    "linear": (torch.clone, lambda v: v, None),
}


def _times_grad(d, y, name):
    """d * activation'(.) where y is the activation's output (may return `d` itself)."""
    grad = _ACTIVATIONS[name][2]
    return d if grad is None else d * grad(y)


def _time_major(x_btf, mask_bt, reverse):
    """(B, T, F) input and (B, T) mask as time-major views in processed order."""
    x = x_btf.transpose(0, 1)
    m = None if mask_bt is None else mask_bt.transpose(0, 1).unsqueeze(-1)
    if reverse:
        x = x.flip(0)
        m = None if m is None else m.flip(0)
    return x, m


def _previous_states(first, step_values, m):
    """The state entering each step: `first`, then the value after each step, where a masked
    step keeps the state it received. step_values[t] is the value a live step t produces."""
    if m is None:
        return torch.cat([first.unsqueeze(0), step_values], 0)[:-1]
    prev = torch.empty_like(step_values)
    state = first
    for t in range(step_values.shape[0]):
        prev[t] = state
        state = torch.where(m[t], step_values[t], state)
    return prev


def _step_cotangents(m_t, g_out, dh, dprev_out, zero_output_for_mask):
    """Cotangents at one step, going backwards: `(dh_new, dh_skip, dprev_out)`, what reaches
    the step's fresh h, what bypasses a masked step to the incoming state (None unmasked),
    and what a masked step's carried output passes to the previous step's output."""
    dout = g_out if dprev_out is None else g_out + dprev_out
    if m_t is None:
        return dout + dh, None, None
    zero = torch.zeros_like(dh)
    dh_new = torch.where(m_t, dout + dh, zero)
    dh_skip = torch.where(m_t, zero, dh)
    dprev_out = None if zero_output_for_mask else torch.where(m_t, zero, dout)
    return dh_new, dh_skip, dprev_out


def _step_output(m_t, h_new, prev_out, zero_output_for_mask):
    """Keras's output at a step: fresh h where live; else the previous output, or zeros."""
    return torch.where(m_t, h_new, torch.zeros_like(h_new) if zero_output_for_mask else prev_out)


# ------------------------------------------------------------------------------------ LSTM
def _lstm_impl(
    x_proj,
    h0,
    c0,
    kernel,
    mask,
    reverse,
    activation,
    recurrent_activation,
    zero_output_for_mask,
):
    act, act_ = _ACTIVATIONS[activation][:2]
    ract_ = _ACTIVATIONS[recurrent_activation][1]
    x, m = _time_major(x_proj, mask, reverse)
    steps, batch, units = x.shape[0], x.shape[1], h0.shape[-1]
    u2, u3 = 2 * units, 3 * units
    all_h = x.new_empty((batch, steps, units))
    gates = x.new_empty((steps, batch, 4 * units))
    cells = x.new_empty((steps, batch, units))
    h, c = h0, c0
    prev_out = torch.zeros_like(h0)
    for t in range(steps):
        # Gates are computed in place in the residual buffer: z = x_t + h @ U, then i, f, o
        # through the recurrent activation and the candidate through the activation.
        gt = gates[t]
        torch.addmm(x[t], h, kernel, out=gt)
        ract_(gt[:, :u2])
        act_(gt[:, u2:u3])
        ract_(gt[:, u3:])
        i, f, g, o = gt.split(units, dim=1)
        c_new = cells[t]
        torch.mul(f, c, out=c_new).addcmul_(i, g)
        h_new = act(c_new).mul_(o)
        if m is None:
            h, c = h_new, c_new
            all_h[:, t] = h_new
        else:
            h = torch.where(m[t], h_new, h)
            c = torch.where(m[t], c_new, c)
            prev_out = _step_output(m[t], h_new, prev_out, zero_output_for_mask)
            all_h[:, t] = prev_out
    # Fresh final states: never an alias of an input or of the `cells` residual.
    return all_h, h.clone(), c.clone(), gates, cells


def _lstm_grad_impl(
    g_all,
    g_h,
    g_c,
    h0,
    c0,
    kernel,
    mask,
    all_h,
    gates,
    cells,
    reverse,
    activation,
    recurrent_activation,
    zero_output_for_mask,
):
    units = h0.shape[-1]
    _, m = _time_major(all_h, mask, reverse)
    gy = g_all.transpose(0, 1)
    steps, batch = gy.shape[0], gy.shape[1]
    # At a live step the output is the fresh h, so the state sequence is rebuilt from outputs.
    h_prev = _previous_states(h0, all_h.transpose(0, 1), m)
    c_prev = _previous_states(c0, cells, m)
    act_c = _ACTIVATIONS[activation][0](cells)
    i, f, g, o = gates.split(units, dim=2)
    ra = recurrent_activation
    # dz_t = [dc_new, dc_new, dc_new, dh_new] * factor_t: the factors need no step-to-step
    # information, so they are computed for all steps at once and scaled in place below.
    dz_all = torch.cat(
        [
            _times_grad(g, i, ra),
            _times_grad(c_prev, f, ra),
            _times_grad(i, g, activation),
            _times_grad(act_c, o, ra),
        ],
        dim=2,
    )
    dz_blocks = dz_all.view(steps, batch, 4, units)
    dc_from_h = _times_grad(o, act_c, activation)
    dh, dc, dprev_out = g_h, g_c, None
    kernel_t = kernel.t()
    for t in range(steps - 1, -1, -1):
        m_t = None if m is None else m[t]
        dh_new, dh_skip, dprev_out = _step_cotangents(
            m_t, gy[t], dh, dprev_out, zero_output_for_mask
        )
        dc_in = dc if m_t is None else torch.where(m_t, dc, torch.zeros_like(dc))
        dc_new = torch.addcmul(dc_in, dh_new, dc_from_h[t])
        dz_blocks[t, :, :3].mul_(dc_new.unsqueeze(1))
        dz_blocks[t, :, 3].mul_(dh_new)
        dc_next = dc_new.mul_(f[t])
        dc = dc_next if m_t is None else dc_next + (dc - dc_in)
        dh = (
            torch.mm(dz_all[t], kernel_t)
            if dh_skip is None
            else torch.addmm(dh_skip, dz_all[t], kernel_t)
        )
    d_kernel = torch.mm(h_prev.reshape(-1, units).t(), dz_all.reshape(-1, 4 * units))
    dx = dz_all.flip(0) if reverse else dz_all
    return dx.transpose(0, 1).contiguous(), dh.clone(), dc.clone(), d_kernel


def _lstm_vjp(gs, x_proj, h0, c0, kernel, mask, out, **params):
    if backward_is_recorded():
        return (*composite_vjp(_lstm_steps, gs[:3], [x_proj, h0, c0, kernel], mask, **params), None)
    all_h, _, _, gates, cells = out
    dx, dh0, dc0, dk = lstm_grad_p.bind(
        gs[0], gs[1], gs[2], h0, c0, kernel, mask, all_h, gates, cells, **params
    )
    return dx, dh0, dc0, dk, None


def _lstm_shape(x_proj, h0, c0, kernel, mask, **params):
    # Shapes alone: running the time loop on meta tensors would cost O(time) per trace.
    ((batch, steps, width), dtype), units = x_proj, h0[0][-1]
    return [
        ((batch, steps, units), dtype),
        ((batch, units), dtype),
        ((batch, units), dtype),
        ((steps, batch, width), dtype),
        ((steps, batch, units), dtype),
    ]


def _lstm_grad_shape(g_all, g_h, g_c, h0, c0, kernel, mask, all_h, gates, cells, **params):
    (steps, batch, width), dtype = gates
    return [((batch, steps, width), dtype), h0, c0, kernel]


lstm_p = Primitive("lstm", _lstm_impl, _lstm_vjp, multiple_results=True, shape_rule=_lstm_shape)
lstm_grad_p = Primitive(
    "lstm_grad", _lstm_grad_impl, multiple_results=True, shape_rule=_lstm_grad_shape
)


# ---------------------------------------------------------------- LSTM over the unprojected input
# The whole layer (input projection included) as one primitive, forward and backward. The
# reference is plain torch (the projection, then the `lstm` recurrence); on the CPU a route
# runs it as one oneDNN RNN call (torch's CPU RNN kernel library, called directly) each way.
# oneDNN keeps its own residual, a flat "workspace" whose length depends on the shapes (and on
# oneDNN): the fourth output is that residual, of a length no shape rule can know, so its
# abstract shape is (0,) (what the reference returns: it needs none); the backward reads it
# when it is oneDNN's. `lstm_sequence` picks this primitive for float32 CPU values with the
# default activations and no mask; every other case is `fused_matmul` + the `lstm` primitive.
_LSTM_MODE = 2  # oneDNN's RNN mode number for LSTM, as torch passes it


def _onednn_operands(x, kernel, recurrent_kernel, bias):
    """What both oneDNN calls take first: the time-major input in processed order (made
    dense; `reverse` is applied by the caller through `_time_major`), torch's (4U, F) and
    (4U, U) weights, and the two bias vectors (the second, torch's recurrent bias, zero)."""
    zeros = x.new_zeros(kernel.shape[-1])
    return [
        x.contiguous(),
        kernel.t(),
        recurrent_kernel.t(),
        zeros if bias is None else bias,
        zeros,
    ]


def _onednn_forward(x, kernel, recurrent_kernel, bias, h0, c0, reverse):
    xt, _ = _time_major(x, None, reverse)
    # oneDNN keeps its workspace only when torch's grad mode is on; no value here requires
    # grad, so torch records nothing.
    with torch.enable_grad():
        return torch.ops.aten.mkldnn_rnn_layer(
            *_onednn_operands(xt, kernel, recurrent_kernel, bias),
            h0,
            c0,
            False,
            [],
            _LSTM_MODE,
            h0.shape[-1],
            1,
            True,
            False,
            False,
            True,
        )


def _lstm_onednn_impl(x, kernel, recurrent_kernel, bias, h0, c0, reverse):
    proj = torch.matmul(x, kernel) if bias is None else torch.matmul(x, kernel) + bias
    all_h, h, c, _, _ = _lstm_impl(
        proj, h0, c0, recurrent_kernel, None, reverse, "tanh", "sigmoid", False
    )
    return all_h, h, c, x.new_empty((0,), dtype=torch.uint8)


def _lstm_onednn_shape(x, kernel, recurrent_kernel, bias, h0, c0, reverse):
    ((batch, steps, _), dtype), units = x, h0[0][-1]
    return [
        ((batch, steps, units), dtype),
        ((batch, units), dtype),
        ((batch, units), dtype),
        ((0,), torch.uint8),
    ]


def _onednn_rnn(vals) -> bool:
    """Whether oneDNN's CPU RNN serves a whole-sequence recurrence on these values.

    The first concrete (non-meta) value tells the device; when every value is data-free (a
    trace over arguments only), the default device does. oneDNN runs float32 on the CPU.
    """
    device = next((v.device.type for v in vals if v is not None and not v.is_meta), None)
    if device is None:
        device = torch.device(config.default_device()).type
    dtype = next(v.dtype for v in vals if v is not None)
    return device == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()


def _lstm_onednn_cpu(x, kernel, recurrent_kernel, bias, h0, c0, reverse):
    if not _onednn_rnn([x]):
        raise NotImplementedError("oneDNN's RNN runs float32 on the CPU")
    y, h, c, workspace = _onednn_forward(x, kernel, recurrent_kernel, bias, h0, c0, reverse)
    return y.transpose(0, 1), h, c, workspace


def _lstm_onednn_grad_impl(
    g_all, g_h, g_c, x, kernel, recurrent_kernel, bias, h0, c0, all_h, h, c, workspace, reverse
):
    # The reference recomputes the recurrence's residuals (it keeps none of its own).
    proj = torch.matmul(x, kernel) if bias is None else torch.matmul(x, kernel) + bias
    params = dict(
        reverse=reverse,
        activation="tanh",
        recurrent_activation="sigmoid",
        zero_output_for_mask=False,
    )
    all_h, _, _, gates, cells = _lstm_impl(proj, h0, c0, recurrent_kernel, None, **params)
    zero = torch.zeros_like
    dproj, dh0, dc0, drk = _lstm_grad_impl(
        zero(all_h) if g_all is None else g_all,
        zero(h0) if g_h is None else g_h,
        zero(c0) if g_c is None else g_c,
        h0,
        c0,
        recurrent_kernel,
        None,
        all_h,
        gates,
        cells,
        **params,
    )
    flat = dproj.reshape(-1, dproj.shape[-1])
    dx = torch.matmul(dproj, kernel.t())
    dk = torch.mm(x.reshape(-1, x.shape[-1]).t(), flat)
    return dx, dk, drk, flat.sum(0), dh0, dc0


def _lstm_onednn_grad_cpu(
    g_all, g_h, g_c, x, kernel, recurrent_kernel, bias, h0, c0, all_h, h, c, workspace, reverse
):
    if workspace.numel() == 0:
        raise NotImplementedError("the forward ran without oneDNN: no workspace to read")
    xt, _ = _time_major(x, None, reverse)
    y = all_h.transpose(0, 1)
    gy = y.new_zeros(()).expand(y.shape) if g_all is None else g_all.transpose(0, 1).contiguous()
    dx, dk, drk, db, _, dh0, dc0 = torch.ops.aten.mkldnn_rnn_layer_backward(
        *_onednn_operands(xt, kernel, recurrent_kernel, bias),
        h0,
        c0,
        y.contiguous(),
        h,
        c,
        gy,
        h.new_zeros(()).expand(h.shape) if g_h is None else g_h,
        g_c,
        False,
        _LSTM_MODE,
        h0.shape[-1],
        1,
        True,
        True,
        False,
        [],
        False,
        workspace,
    )
    dx = dx.flip(0) if reverse else dx
    return dx.transpose(0, 1).contiguous(), dk.t(), drk.t(), db, dh0, dc0


def _lstm_onednn_grad_shape(
    g_all, g_h, g_c, x, kernel, recurrent_kernel, bias, h0, c0, all_h, h, c, workspace, reverse
):
    return [x, kernel, recurrent_kernel, (kernel[0][1:], kernel[1]), h0, c0]


def _lstm_projected_steps(x, kernel, recurrent_kernel, bias, h0, c0, mask, reverse):
    """The same recurrence with keratron ops (for gradients of gradients)."""
    proj = fused_matmul(x, kernel, bias)
    return _lstm_steps(proj, h0, c0, recurrent_kernel, mask, reverse, "tanh", "sigmoid", False)


def _lstm_onednn_vjp(gs, x, kernel, recurrent_kernel, bias, h0, c0, out, reverse):
    inputs = [x, kernel, recurrent_kernel, bias, h0, c0]
    if backward_is_recorded():
        filled = [zeros_like_p.bind(o) if g is None else g for g, o in zip(gs[:3], out[:3])]
        params = {"reverse": reverse}
        return composite_vjp(_lstm_projected_steps, filled, inputs, None, **params)
    grads = lstm_onednn_grad_p.bind(gs[0], gs[1], gs[2], *inputs, *out, reverse=reverse)
    return grads[:3] + (None if bias is None else grads[3],) + grads[4:]


lstm_onednn_p = Primitive(
    "lstm_onednn",
    _lstm_onednn_impl,
    _lstm_onednn_vjp,
    multiple_results=True,
    vjp_accepts_none=True,
    shape_rule=_lstm_onednn_shape,
)
lstm_onednn_grad_p = Primitive(
    "lstm_onednn_grad",
    _lstm_onednn_grad_impl,
    multiple_results=True,
    shape_rule=_lstm_onednn_grad_shape,
)
device_route(lstm_onednn_p, "cpu")(_lstm_onednn_cpu)
device_route(lstm_onednn_grad_p, "cpu")(_lstm_onednn_grad_cpu)


# ------------------------------------------------------------------------------------- GRU
def _gru_impl(
    x_proj,
    h0,
    kernel,
    recurrent_bias,
    mask,
    reverse,
    reset_after,
    activation,
    recurrent_activation,
    zero_output_for_mask,
):
    act_ = _ACTIVATIONS[activation][1]
    ract_ = _ACTIVATIONS[recurrent_activation][1]
    x, m = _time_major(x_proj, mask, reverse)
    steps, batch, units = x.shape[0], x.shape[1], h0.shape[-1]
    u2 = 2 * units
    all_h = x.new_empty((batch, steps, units))
    gates = x.new_empty((steps, batch, 3 * units))
    # reset_after: the recurrent candidate term h @ U_h + b_h; otherwise r * h.
    aux = x.new_empty((steps, batch, units))
    h = h0
    prev_out = torch.zeros_like(h0)
    for t in range(steps):
        xt, gt = x[t], gates[t]
        zr, hh = gt[:, :u2], gt[:, u2:]
        if reset_after:
            if recurrent_bias is None:
                rec = torch.mm(h, kernel)
            else:
                rec = torch.addmm(recurrent_bias, h, kernel)
            torch.add(xt[:, :u2], rec[:, :u2], out=zr)
            ract_(zr)
            aux[t] = rec[:, u2:]
            torch.addcmul(xt[:, u2:], gt[:, units:u2], aux[t], out=hh)
        else:
            zr.copy_(torch.addmm(xt[:, :u2], h, kernel[:, :u2]))
            ract_(zr)
            torch.mul(gt[:, units:u2], h, out=aux[t])
            hh.copy_(torch.addmm(xt[:, u2:], aux[t], kernel[:, u2:]))
        act_(hh)
        h_new = torch.lerp(hh, h, gt[:, :units])  # z * h + (1 - z) * hh
        if m is None:
            h = h_new
            all_h[:, t] = h_new
        else:
            h = torch.where(m[t], h_new, h)
            prev_out = _step_output(m[t], h_new, prev_out, zero_output_for_mask)
            all_h[:, t] = prev_out
    return all_h, h.clone(), gates, aux


def _gru_grad_impl(
    g_all,
    g_h,
    h0,
    kernel,
    recurrent_bias,
    mask,
    all_h,
    gates,
    aux,
    reverse,
    reset_after,
    activation,
    recurrent_activation,
    zero_output_for_mask,
):
    units = h0.shape[-1]
    u2 = 2 * units
    _, m = _time_major(all_h, mask, reverse)
    gy = g_all.transpose(0, 1)
    steps, batch = gy.shape[0], gy.shape[1]
    h_prev = _previous_states(h0, all_h.transpose(0, 1), m)
    z, r, hh = gates.split(units, dim=2)
    ra = recurrent_activation
    # Per unit of dh_new: the candidate pre-activation's and the update gate's cotangents.
    per_hh = _times_grad(1.0 - z, hh, activation)
    per_z = _times_grad(h_prev - hh, z, ra)
    kernel_t = kernel.t()
    dh, dprev_out = g_h, None
    if reset_after:
        # Every cotangent of the step is dh_new times a factor known from the forward pass:
        # the recurrent pre-activations' [z, r, r * candidate term] and x_h's.
        drec_all = torch.cat([per_z, _times_grad(per_hh * aux, r, ra), per_hh * r], dim=2)
        drec_blocks = drec_all.view(steps, batch, 3, units)
        dxh_all = per_hh
        for t in range(steps - 1, -1, -1):
            m_t = None if m is None else m[t]
            dh_new, dh_skip, dprev_out = _step_cotangents(
                m_t, gy[t], dh, dprev_out, zero_output_for_mask
            )
            drec_blocks[t].mul_(dh_new.unsqueeze(1))
            dxh_all[t].mul_(dh_new)
            dh = torch.addmm(dh_new * z[t], drec_all[t], kernel_t)
            if dh_skip is not None:
                dh += dh_skip
        drec_flat = drec_all.reshape(-1, 3 * units)
        d_kernel = torch.mm(h_prev.reshape(-1, units).t(), drec_flat)
        d_bias = drec_flat.sum(0)
        dx_all = torch.cat([drec_all[..., :u2], dxh_all], dim=2)
    else:
        # dx = [dh_new, d(r * h) . h * r', dh_new] * factors; d(r * h) needs U_h per step.
        dx_all = torch.cat([per_z, _times_grad(h_prev, r, ra), per_hh], dim=2)
        kernel_zr_t, kernel_h_t = kernel[:, :u2].t(), kernel[:, u2:].t()
        for t in range(steps - 1, -1, -1):
            m_t = None if m is None else m[t]
            dh_new, dh_skip, dprev_out = _step_cotangents(
                m_t, gy[t], dh, dprev_out, zero_output_for_mask
            )
            dx = dx_all[t]
            dx[:, :units].mul_(dh_new)
            dx[:, u2:].mul_(dh_new)
            d_rh = torch.mm(dx[:, u2:], kernel_h_t)
            dx[:, units:u2].mul_(d_rh)
            dh = torch.addmm(torch.addcmul(dh_new * z[t], d_rh, r[t]), dx[:, :u2], kernel_zr_t)
            if dh_skip is not None:
                dh += dh_skip
        d_kernel = torch.cat(
            [
                torch.mm(h_prev.reshape(-1, units).t(), dx_all[..., :u2].reshape(-1, u2)),
                torch.mm(aux.reshape(-1, units).t(), dx_all[..., u2:].reshape(-1, units)),
            ],
            dim=1,
        )
        d_bias = gates.new_zeros((3 * units,))
    dx = dx_all.flip(0) if reverse else dx_all
    return dx.transpose(0, 1).contiguous(), dh.clone(), d_kernel, d_bias


def _gru_vjp(gs, x_proj, h0, kernel, recurrent_bias, mask, out, **params):
    if backward_is_recorded():
        inputs = [x_proj, h0, kernel, recurrent_bias]
        return (*composite_vjp(_gru_steps, gs[:2], inputs, mask, **params), None)
    all_h, _, gates, aux = out
    dx, dh0, dk, db = gru_grad_p.bind(
        gs[0], gs[1], h0, kernel, recurrent_bias, mask, all_h, gates, aux, **params
    )
    return dx, dh0, dk, (None if recurrent_bias is None else db), None


def _gru_shape(x_proj, h0, kernel, recurrent_bias, mask, **params):
    ((batch, steps, width), dtype), units = x_proj, h0[0][-1]
    return [
        ((batch, steps, units), dtype),
        ((batch, units), dtype),
        ((steps, batch, width), dtype),
        ((steps, batch, units), dtype),
    ]


def _gru_grad_shape(g_all, g_h, h0, kernel, recurrent_bias, mask, all_h, gates, aux, **params):
    (steps, batch, width), dtype = gates
    return [((batch, steps, width), dtype), h0, kernel, ((width,), dtype)]


gru_p = Primitive("gru", _gru_impl, _gru_vjp, multiple_results=True, shape_rule=_gru_shape)
gru_grad_p = Primitive(
    "gru_grad", _gru_grad_impl, multiple_results=True, shape_rule=_gru_grad_shape
)


# ------------------------------------------------------- differentiable step-by-step forms
def _hard_sigmoid_op(x):
    return clip(add(multiply(x, 1.0 / 6.0), 0.5), 0.0, 1.0)


_ACTIVATION_OPS = {
    "tanh": tanh,
    "sigmoid": sigmoid_p.bind,
    "relu": relu,
    "hard_sigmoid": _hard_sigmoid_op,
    "linear": lambda x: x,
}


def _time_steps(x_proj, reverse):
    steps = range(x_proj.shape[1])
    return reversed(steps) if reverse else steps


def _stack_outputs(outs, x_proj, units):
    if outs:
        return stack(outs, axis=1)
    return x_proj[:, :, :units]  # an empty sequence: (batch, 0, units)


def _carry(mask, t, new, old):
    return new if mask is None else where(expand_dims(mask[:, t], -1), new, old)


def _lstm_steps(
    x_proj, h0, c0, kernel, mask, reverse, activation, recurrent_activation, zero_output_for_mask
):
    act, ract = _ACTIVATION_OPS[activation], _ACTIVATION_OPS[recurrent_activation]
    units = h0.shape[-1]
    h, c, out, outs = h0, c0, zeros_like_p.bind(h0), []
    for t in _time_steps(x_proj, reverse):
        z = add(x_proj[:, t], matmul(h, kernel))
        i, f = ract(z[:, :units]), ract(z[:, units : 2 * units])
        g, o = act(z[:, 2 * units : 3 * units]), ract(z[:, 3 * units :])
        c_new = add(multiply(f, c), multiply(i, g))
        h_new = multiply(o, act(c_new))
        out = _carry(mask, t, h_new, zeros_like_p.bind(h_new) if zero_output_for_mask else out)
        outs.append(out)
        h, c = _carry(mask, t, h_new, h), _carry(mask, t, c_new, c)
    return _stack_outputs(outs, x_proj, units), h, c


def _gru_steps(
    x_proj,
    h0,
    kernel,
    recurrent_bias,
    mask,
    reverse,
    reset_after,
    activation,
    recurrent_activation,
    zero_output_for_mask,
):
    act, ract = _ACTIVATION_OPS[activation], _ACTIVATION_OPS[recurrent_activation]
    u, u2 = h0.shape[-1], 2 * h0.shape[-1]
    h, out, outs = h0, zeros_like_p.bind(h0), []
    for t in _time_steps(x_proj, reverse):
        xt = x_proj[:, t]
        if reset_after:
            rec = matmul(h, kernel)
            rec = rec if recurrent_bias is None else add(rec, recurrent_bias)
            z, r = ract(add(xt[:, :u], rec[:, :u])), ract(add(xt[:, u:u2], rec[:, u:u2]))
            hh = act(add(xt[:, u2:], multiply(r, rec[:, u2:])))
        else:
            rec = matmul(h, kernel[:, :u2])
            z, r = ract(add(xt[:, :u], rec[:, :u])), ract(add(xt[:, u:u2], rec[:, u:u2]))
            hh = act(add(xt[:, u2:], matmul(multiply(r, h), kernel[:, u2:])))
        h_new = add(hh, multiply(z, subtract(h, hh)))
        out = _carry(mask, t, h_new, zeros_like_p.bind(h_new) if zero_output_for_mask else out)
        outs.append(out)
        h = _carry(mask, t, h_new, h)
    return _stack_outputs(outs, x_proj, u), h


# ------------------------------------------------------------------------------ public ops
def _check_activation(op, arg, name):
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"{op}: `{arg}` must be one of {sorted(_ACTIVATIONS)}. Received: {arg}={name!r}"
        )


def _check_shape(op, arg, t: Tensor, expected: tuple):
    if t.shape != expected:
        raise ValueError(
            f"{op}: `{arg}` must have shape {expected}. Received: {arg}.shape={t.shape}"
        )


def _prepare(op, x_proj, gates, states, recurrent_kernel, mask, activation, recurrent_activation):
    """Converts and validates the arguments shared by `lstm` and `gru`."""
    x_proj = as_tensor(x_proj)
    if x_proj.ndim != 3 or x_proj.shape[-1] % gates:
        raise ValueError(
            f"{op}: `x_proj` must have shape (batch, time, {gates} * units). "
            f"Received: x_proj.shape={x_proj.shape}"
        )
    if not x_proj._value.is_floating_point():
        raise TypeError(f"{op}: `x_proj` must be floating point. Received: dtype={x_proj.dtype}")
    batch, steps, width = x_proj.shape
    units = width // gates
    device = x_proj._value.device

    def same(name, t, shape):
        t = cast(as_tensor(t), x_proj.dtype)
        t = on_device(t, device)
        _check_shape(op, name, t, shape)
        return t

    states = [same(name, s, (batch, units)) for name, s in states]
    kernel = same("recurrent_kernel", recurrent_kernel, (units, width))
    if mask is not None:
        mask = cast(as_tensor(mask), "bool")
        mask = on_device(mask, device)
        _check_shape(op, "mask", mask, (batch, steps))
    _check_activation(op, "activation", activation)
    _check_activation(op, "recurrent_activation", recurrent_activation)
    return x_proj, states, kernel, mask, same


def lstm(
    x_proj,
    h0,
    c0,
    recurrent_kernel,
    mask=None,
    reverse: bool = False,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    zero_output_for_mask: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """Runs an LSTM over a whole sequence, given its input projection.

    Per step: `z = x_proj[:, t] + h @ recurrent_kernel`, split into gates i, f, c, o;
    `c = f * c + i * activation(z_c)`, `h = o * activation(c)` (i, f, o through
    `recurrent_activation`).

    Args:
        x_proj: `x @ kernel + bias`, shape (batch, time, 4 * units).
        h0: initial hidden state, (batch, units).
        c0: initial cell state, (batch, units).
        recurrent_kernel: (units, 4 * units).
        mask: optional (batch, time) booleans; False steps keep the state.
        reverse: process the sequence backwards (Keras `go_backwards`); outputs are in
            processed order.
        activation: "tanh", "sigmoid", "relu", "hard_sigmoid" or "linear".
        recurrent_activation: same choices, for the i, f, o gates.
        zero_output_for_mask: masked steps output zeros instead of the previous output.

    Returns:
        `(all_h, last_h, last_c)`: outputs (batch, time, units) and final states.

    Raises:
        ValueError: on shape mismatches or unknown activation names.

    Example:
        >>> all_h, h, c = lstm(np.zeros((2, 5, 12)), np.zeros((2, 3)), np.zeros((2, 3)),
        ...                    np.zeros((3, 12)))
        >>> all_h.shape, h.shape
        ((2, 5, 3), (2, 3))
    """
    x_proj, (h0, c0), kernel, mask, _ = _prepare(
        "lstm",
        x_proj,
        4,
        [("h0", h0), ("c0", c0)],
        recurrent_kernel,
        mask,
        activation,
        recurrent_activation,
    )
    out = lstm_p.bind(
        x_proj,
        h0,
        c0,
        kernel,
        mask,
        reverse=bool(reverse),
        activation=activation,
        recurrent_activation=recurrent_activation,
        zero_output_for_mask=bool(zero_output_for_mask),
    )
    return out[0], out[1], out[2]


def lstm_sequence(
    x,
    kernel,
    recurrent_kernel,
    bias,
    h0,
    c0,
    mask=None,
    reverse: bool = False,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    zero_output_for_mask: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """Runs an LSTM layer over a whole sequence: `lstm` after the input projection.

    The same result as `lstm(x @ kernel + bias, h0, c0, recurrent_kernel, ...)`. For float32
    on the CPU with tanh / sigmoid activations and no mask, projection and recurrence are one
    oneDNN RNN call forward and one backward.

    Args:
        x: inputs, shape (batch, time, features).
        kernel: (features, 4 * units).
        recurrent_kernel: (units, 4 * units).
        bias: (4 * units,) or None.
        h0, c0, mask, reverse, activation, recurrent_activation, zero_output_for_mask: as
            in `lstm`.

    Returns:
        `(all_h, last_h, last_c)`: outputs (batch, time, units) and final states.

    Raises:
        ValueError: on shape mismatches or unknown activation names.

    Example:
        >>> all_h, h, c = lstm_sequence(np.zeros((2, 5, 4), "float32"),
        ...     np.zeros((4, 12), "float32"), np.zeros((3, 12), "float32"), None,
        ...     np.zeros((2, 3), "float32"), np.zeros((2, 3), "float32"))
        >>> all_h.shape, c.shape
        ((2, 5, 3), (2, 3))
    """
    x = as_tensor(x)
    if x.ndim != 3:
        raise ValueError(
            f"lstm_sequence: `x` must have shape (batch, time, features). Received: "
            f"x.shape={x.shape}"
        )
    kernel, recurrent_kernel = as_tensor(kernel), as_tensor(recurrent_kernel)
    plain = mask is None and (activation, recurrent_activation) == ("tanh", "sigmoid")
    values = [kernel._value, recurrent_kernel._value, x._value]
    if not (plain and x.shape[1] and _onednn_rnn(values)):
        return lstm(
            fused_matmul(x, kernel, bias),
            h0,
            c0,
            recurrent_kernel,
            mask,
            reverse,
            activation,
            recurrent_activation,
            zero_output_for_mask,
        )
    (batch, _, features), units = x.shape, recurrent_kernel.shape[0]
    device = x._value.device

    def same(name, t, shape):
        t = on_device(cast(as_tensor(t), "float32"), device)
        _check_shape("lstm_sequence", name, t, shape)
        return t

    kernel = same("kernel", kernel, (features, 4 * units))
    rkernel = same("recurrent_kernel", recurrent_kernel, (units, 4 * units))
    bias = None if bias is None else same("bias", bias, (4 * units,))
    h0, c0 = same("h0", h0, (batch, units)), same("c0", c0, (batch, units))
    out = lstm_onednn_p.bind(x, kernel, rkernel, bias, h0, c0, reverse=bool(reverse))
    return out[0], out[1], out[2]


def gru(
    x_proj,
    h0,
    recurrent_kernel,
    recurrent_bias=None,
    mask=None,
    reverse: bool = False,
    reset_after: bool = True,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    zero_output_for_mask: bool = False,
) -> tuple[Tensor, Tensor]:
    """Runs a GRU over a whole sequence, given its input projection.

    Gates z, r, h in Keras's order. With `reset_after=True` (Keras's default) the candidate
    is `activation(x_h + r * (h @ U_h + b_h))`; with `reset_after=False` it is
    `activation(x_h + (r * h) @ U_h)`. The new state is `z * h + (1 - z) * candidate`.

    Args:
        x_proj: `x @ kernel + input_bias`, shape (batch, time, 3 * units).
        h0: initial state, (batch, units).
        recurrent_kernel: (units, 3 * units).
        recurrent_bias: optional (3 * units,), added to `h @ recurrent_kernel`; only with
            `reset_after=True` (Keras's second bias row).
        mask: optional (batch, time) booleans; False steps keep the state.
        reverse: process the sequence backwards; outputs are in processed order.
        reset_after: where the reset gate applies (see above).
        activation: "tanh", "sigmoid", "relu", "hard_sigmoid" or "linear".
        recurrent_activation: same choices, for the z and r gates.
        zero_output_for_mask: masked steps output zeros instead of the previous output.

    Returns:
        `(all_h, last_h)`: outputs (batch, time, units) and the final state.

    Raises:
        ValueError: on shape mismatches, unknown activation names, or a recurrent bias with
            `reset_after=False`.

    Example:
        >>> all_h, h = gru(np.zeros((2, 5, 9)), np.zeros((2, 3)), np.zeros((3, 9)))
        >>> all_h.shape
        (2, 5, 3)
    """
    x_proj, (h0,), kernel, mask, same = _prepare(
        "gru",
        x_proj,
        3,
        [("h0", h0)],
        recurrent_kernel,
        mask,
        activation,
        recurrent_activation,
    )
    if recurrent_bias is not None:
        if not reset_after:
            raise ValueError(
                "gru: `recurrent_bias` is only used with reset_after=True (with "
                "reset_after=False the whole bias belongs in x_proj). "
                "Received: reset_after=False and a recurrent_bias"
            )
        recurrent_bias = same("recurrent_bias", recurrent_bias, (x_proj.shape[-1],))
    out = gru_p.bind(
        x_proj,
        h0,
        kernel,
        recurrent_bias,
        mask,
        reverse=bool(reverse),
        reset_after=bool(reset_after),
        activation=activation,
        recurrent_activation=recurrent_activation,
        zero_output_for_mask=bool(zero_output_for_mask),
    )
    return out[0], out[1]
