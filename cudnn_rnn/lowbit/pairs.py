"""Two batch slices a CTA on one copy of their weight rows (the kernel's ``DUAL``): each
half of the CTA's threads runs one slice with its own counters, ring and barriers, so that
one half's products and gate math fill the time the other half waits for its producers,
while the weight rows stay on chip once.

The partition is planned as for twice the CTAs (two slices a multiprocessor), then
:func:`pair` orders the slices so that slices ``2c`` and ``2c + 1`` (CTA ``c``'s halves) are
the same units of the same pseudo-layer in the batch slices ``2m`` and ``2m + 1``, and
moves the second one's buffers (dequantization factors, h and c, the input projection, the
ring) past the first one's in shared memory; the weight rows (and wgmma's zeros past them)
lie once, at the start."""
from __future__ import annotations

from dataclasses import replace

from cudnn_rnn.lowbit.fits import DoesNotFit, _up

ALIGN = 128  # the second half's buffers start where the first's would: alike modulo this


def check(batch_slices: int, bulk: bool, mcast: int) -> None:
    """:class:`DoesNotFit` where two slices a CTA cannot run: an even number of batch slices
    (a CTA's two are consecutive), bulk staging ('wb': a half's barriers are named barriers
    over its warpgroups, each half its own mbarriers), no shared copies."""
    if batch_slices % 2:
        raise DoesNotFit(f"two batch slices a CTA ('d') pair them: an even number, not "
                         f"{batch_slices}")
    if not bulk or mcast:
        raise DoesNotFit("two batch slices a CTA ('d') are bulk staging's, without shared "
                         "copies: 'wb' first, no 'm'")


def pair(part) -> None:
    """Order ``part``'s slices (as :func:`cudnn_rnn.lowbit.partition._fill` made them, batch
    slice by batch slice) in pairs of one CTA and move each second one's buffers past the
    first one's; its :attr:`~cudnn_rnn.lowbit.partition.Slice.smem` is then the pair's."""
    per = len(part.slices) // part.batch_slices
    paired = []
    for m in range(0, part.batch_slices, 2):
        first = part.slices[m * per:(m + 1) * per]
        second = part.slices[(m + 1) * per:(m + 2) * per]
        for a, b in zip(first, second):
            if (a.k, a.j0, a.nu, a.mpad, a.nc, a.off_dq) != (b.k, b.j0, b.nu, b.mpad, b.nc,
                                                             b.off_dq):
                raise AssertionError(f"slices {a} and {b} of one CTA hold different rows")
            shift = _up(a.smem - b.off_dq, ALIGN)
            paired += [a, replace(b, off_dq=b.off_dq + shift, off_own=b.off_own + shift,
                                  off_gx=b.off_gx + shift, off_ring=b.off_ring + shift,
                                  smem=b.smem + shift)]
    part.slices[:] = paired
