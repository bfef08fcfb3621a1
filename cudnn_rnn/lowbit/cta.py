"""What one CTA of the persistent kernel owns (:class:`Slice`: its pseudo-layer, units,
batch rows, split of K and shared-memory layout) and the byte units the partition counts in;
:func:`cudnn_rnn.lowbit.partition.plan` makes the slices."""
from __future__ import annotations

from dataclasses import dataclass

from cudnn_rnn.lowbit.fits import _up

FORMAT_BYTES = {"fp16": 2, "bf16": 2, "int8": 1, "e4m3": 1}
CHUNK = 32  # bytes of K in one mma k-step
PAD = 16  # bytes after each shared-memory row (no bank conflicts in ldmatrix)


def row_bytes(features: int, fmt: str) -> int:
    """Bytes of one row of ``features`` codes in global memory, padded to whole chunks."""
    return _up(features * FORMAT_BYTES[fmt], CHUNK)


def pstride(mpad: int) -> int:
    """:attr:`Slice.pstride` (``mpad`` is a multiple of 16; the kernel's formula)."""
    return mpad + 4 + (mpad & 16)


@dataclass(frozen=True)
class Slice:
    """One CTA's share and its shared-memory layout (byte offsets)."""
    k: int  # pseudo-layer
    j0: int
    nu: int
    bs: int  # batch slice
    b0: int
    nb: int
    mpad: int  # rows (gates * nu of the pseudo-layer's full slices) padded to m-tiles of 16
    npad: int  # batch rows padded to whole n-tiles of 8
    ts: int  # warp groups along n
    ks: int  # warp groups along K
    kx: int  # of them, those on the input part (0: the groups split K evenly, see chunks)
    nxc: int  # chunks of the input part (0 for layer 0 but with Partition.input_inside)
    nc: int  # chunks in all
    blob: int  # where its weight rows start in the blob
    off_dq: int
    off_own: int
    off_gx: int
    off_ring: int
    smem: int  # bytes in all
    ctr: int = 0  # its group's counter (Partition.counter), which its steps advance

    @property
    def rowb(self) -> int:
        """A weight row's stride in shared memory (and in the blob)."""
        return self.nc * CHUNK + PAD

    def chunks(self, kg: int) -> range:
        """The chunks k-group ``kg`` multiplies (the kernel's formula): with ``kx`` > 0, the
        input part's among groups ``0 .. kx-1`` and the recurrent part's among the rest, each
        part in equal runs (the last may be shorter); with ``kx`` 0, all of K evenly."""
        if kg < self.kx:
            span = -(-self.nxc // self.kx)
            c0 = min(self.nxc, kg * span)
            return range(c0, min(self.nxc, c0 + span))
        base = self.nxc if self.kx else 0
        span = -(-(self.nc - base) // (self.ks - self.kx))
        c0 = min(self.nc, base + (kg - self.kx) * span)
        return range(c0, min(self.nc, c0 + span))

    @property
    def straddles(self) -> bool:
        """Whether a k-group multiplies chunks of both parts (one group, two parts)."""
        return any(self.chunks(g).start < self.nxc < self.chunks(g).stop
                   for g in range(self.ks))

    @property
    def pstride(self) -> int:
        """Floats between two batch columns of the partial sums: ``mpad`` padded to 4 past a
        multiple of 32, so that a warp's stores of its accumulators hit 32 banks."""
        return pstride(self.mpad)
