"""Work-arounds for Triton interpreter bugs, applied by the tests that need them."""

import os


def widen_bf16_dots(monkeypatch) -> None:
    """Triton 3.9's interpreter multiplies the raw uint16 bits of bfloat16 `tl.dot` operands
    (it stores bfloat16 as uint16 for numpy): widen them to float32 first, as the GPU's
    tensor cores do (a product of two bfloat16 values is exact in float32). Nothing to patch
    when the kernels run compiled (on a GPU)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder

    original = InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, *args):
        widen = [x.dtype.scalar == tl.bfloat16 for x in (a, b)]
        a, b = (self.cast_impl(x, tl.float32) if w else x for x, w in zip((a, b), widen))
        return original(self, a, b, d, *args)

    monkeypatch.setattr(InterpreterBuilder, "create_dot", create_dot)
