"""Decode steps of the merged sampling copy through MKL's packed float32 GEMM, on a CPU (`packed_decode`).

Why: a decode step multiplies a few rows (one new token per sequence) by every weight of the model, so on a
CPU it is bound by reading the weights, and the plain `sgemm` reads them well below the speed a plain sum
reaches here. MKL can store a weight once in the blocked layout its GEMM kernel reads (`cblas_sgemm_pack`);
products of that many rows (`cblas_sgemm_compute`) then skip the packing the plain call repeats every time.
So the few-row products of a decode step are faster packed than plain, the LM head's most of all
(benchmarks/bench_step_phases.py --matmul-only times both). The packed
kernel sums in another order, so a product differs from the plain one by float32 rounding (about 1e-6 of its
size), as the merged copy's own logits differ from the policy's; the completions drawn stay the same
(tests/test_packed_decode.py, tests/test_generation_copy.py).

Each linear layer gets one buffer, packed on the first decode step after each refresh of the copy, for the
row count of a training round, and packed again in place at the next refresh: a second copy of the linear weights in
memory (0.54 GB for the 135M model), held for the run. Any other product (a prefill of many rows, a product
with gradients) runs the plain weight, as before.

Ties to torch: MKL is linked into `libtorch_cpu`, which exports its CBLAS packed-GEMM functions; they are
called through ctypes, with 32-bit integers (torch's static MKL is LP64). MKL asks for a buffer several times
the weight's size (`cblas_sgemm_pack_get_size`: 2x for the LM head, up to 21x for a small projection, 2.6 GB
of address space for the 135M model's 0.5 GB) but writes about the weight's size into it, so only that much
becomes resident. torch's own wrappers (`torch.ops.mkl._mkl_reorder_linear_weight` and `_mkl_linear`, what
inductor calls when it freezes a CPU model) compute the same numbers to the bit (tests/test_packed_decode.py),
but allocate a new buffer at each repack, and the pages MKL touches land elsewhere in it each time: a demo
run's resident memory grew by several times the weights' size instead of once. Here each buffer is made once
and packed again in place. `available()` packs one small matrix and checks the product against torch's before
anything uses it.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# CBLAS's enumerations (mkl_cblas.h)
ROW_MAJOR, NO_TRANS, TRANS, PACKED, B_MATRIX = 101, 111, 112, 151, 162


@dataclass
class PackedWeight:
    """One weight's packed copy for MKL: the weight, the buffer it is packed into for `rows` rows, and whether the
    buffer holds the weight's current values (`current`: False after the weights changed, until packed again)."""

    weight: Any  # a float32 torch tensor (out_features, in_features)
    buffer: Any  # new_buffer's tensor
    rows: int
    current: bool = False


@functools.cache
def _mkl():
    """libtorch_cpu's CBLAS packed-GEMM functions, typed for ctypes."""
    import torch

    lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
    c_int, c_ptr = ctypes.c_int, ctypes.c_void_p
    lib.cblas_sgemm_pack_get_size.restype = ctypes.c_size_t
    lib.cblas_sgemm_pack_get_size.argtypes = [c_int] * 4
    lib.cblas_sgemm_pack.restype = None
    lib.cblas_sgemm_pack.argtypes = [c_int] * 6 + [ctypes.c_float, c_ptr, c_int, c_ptr]
    lib.cblas_sgemm_compute.restype = None
    lib.cblas_sgemm_compute.argtypes = [c_int] * 6 + [c_ptr, c_int, c_ptr, c_int, ctypes.c_float, c_ptr, c_int]
    return lib


@functools.cache
def available() -> str | None:
    """None when this torch can run MKL's packed GEMM, else why not (checked once a process)."""
    import torch

    if not torch.backends.mkl.is_available():
        return "this torch is built without MKL"
    try:
        _mkl()
    except (OSError, AttributeError) as error:
        return f"this torch's libtorch_cpu exports no MKL packed GEMM ({error})"
    # one small product against torch's: an MKL with other integer sizes or layouts must not run a model
    weight, x = torch.randn(24, 16, generator=torch.Generator().manual_seed(0)), torch.ones(2, 1, 16)
    buffer = new_buffer(weight, 2)
    pack_into(buffer, weight, 2)
    if not torch.allclose(packed_linear(x, buffer, 24), torch.nn.functional.linear(x, weight), atol=1e-4):
        return "MKL's packed GEMM gave another product than torch's in a check"
    return None


def is_decode_step(x) -> bool:
    """One new token per row: a (rows, 1, features) input."""
    return x.dim() == 3 and x.shape[1] == 1


def new_buffer(weight, rows: int):
    """An empty buffer for `weight` (out x in, float32) packed for products of `rows` rows."""
    import torch

    out_features, in_features = weight.shape
    size = _mkl().cblas_sgemm_pack_get_size(B_MATRIX, rows, out_features, in_features)
    return torch.empty(size // 4 + 1, dtype=torch.float32)


def pack_into(buffer, weight, rows: int) -> None:
    """Write `weight` into `buffer` in MKL's layout for x @ weight.T with x of `rows` rows."""
    out_features, in_features = weight.shape
    weight = weight.detach().contiguous()
    _mkl().cblas_sgemm_pack(
        ROW_MAJOR,
        B_MATRIX,
        TRANS,
        rows,
        out_features,
        in_features,
        1.0,
        weight.data_ptr(),
        in_features,
        buffer.data_ptr(),
    )


def compute_into(out, x, buffer) -> None:
    """out = x @ weight.T for a weight packed into `buffer`: x and out contiguous float32, their last
    dimensions the weight's in and out features, the rows before them the row count it was packed for."""
    in_features, out_features = x.shape[-1], out.shape[-1]
    _mkl().cblas_sgemm_compute(
        ROW_MAJOR,
        NO_TRANS,
        PACKED,
        x.numel() // in_features,
        out_features,
        in_features,
        x.data_ptr(),
        in_features,
        buffer.data_ptr(),
        in_features,
        0.0,
        out.data_ptr(),
        out_features,
    )


def packed_linear(x, buffer, out_features: int, bias=None):
    """x @ weight.T (+ bias) for a weight packed into `buffer` for x's row count."""
    import torch

    rows = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty(rows.shape[0], out_features, dtype=torch.float32)
    compute_into(out, rows, buffer)
    if bias is not None:
        out.add_(bias)
    return out.view(*x.shape[:-1], out_features)


class PackedDecode:
    """Every float32 linear layer of a CPU model runs decode steps on its weight packed for MKL, packed again
    in the same buffer after `invalidate()` (the weights changed).

    `rows`: the one row count to pack for (a training round's sequences); decode steps of other row counts
    (held-out evaluation's batches) run the plain weight, so the packed copy stays one copy. None: whatever
    row count the last decode step had."""

    def __init__(self, model, rows: int | None = None):
        import torch

        self.rows = rows
        # plain Linear layers only: a subclass (a MoE router returning a tuple) has a forward of its own
        self.layers = [
            module
            for module in model.modules()
            if type(module) is torch.nn.Linear
            and module.weight.dtype == torch.float32
            and module.weight.device.type == "cpu"
        ]
        # id(layer) -> its packed weight
        self.packed: dict[int, PackedWeight] = {}
        self.steps = 0  # products computed packed: a swap that never took effect shows as none (trainer/levers.py)
        for layer in self.layers:
            layer.forward = self._forward_of(layer)

    def invalidate(self, weights=None) -> None:
        """These weights changed (None: all of them): pack them again, into the same buffers, at the next
        decode step. Layers the LoRA update leaves alone (the LM head) stay packed."""
        changed = None if weights is None else {id(weight) for weight in weights}
        for layer in self.layers:
            entry = self.packed.get(id(layer))
            if entry is not None and (changed is None or id(layer.weight) in changed):
                entry.current = False

    def _buffer(self, layer, rows: int):
        entry = self.packed.get(id(layer))
        if entry is None or entry.rows != rows:
            entry = self.packed[id(layer)] = PackedWeight(layer.weight, new_buffer(layer.weight, rows), rows)
        if not entry.current:
            pack_into(entry.buffer, layer.weight, rows)
            entry.current = True
        return entry.buffer

    def _forward_of(self, layer):
        import torch
        import torch.nn.functional as F

        def forward(x):
            if (
                not is_decode_step(x)
                or torch.is_grad_enabled()
                or x.dtype != torch.float32
                or self.rows not in (None, x.shape[0])
                or torch.is_autocast_enabled("cpu")
            ):
                return F.linear(x, layer.weight, layer.bias)
            self.steps += 1
            return packed_linear(x, self._buffer(layer, x.shape[0]), layer.out_features, layer.bias)

        return forward
