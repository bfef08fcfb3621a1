"""The launch's tables, made from a :class:`~cudnn_rnn.lowbit.partition.Partition`: when each
CTA may take each step (:func:`waits`), every CTA's weight rows in its shared-memory
layout (:func:`blob`), and the records of the kernel's structs (:data:`LAYER`, one per
pseudo-layer: :func:`layers`; :data:`SLICE`, one per CTA: :func:`slices`)."""
from __future__ import annotations

import numpy as np

from cudnn_rnn.engine import walk
from cudnn_rnn.lowbit import wgmma
from cudnn_rnn.lowbit.partition import CHUNK, MAX_WAITS, PAD, Partition

_P = "u8"  # a device pointer
LAYER = np.dtype([(n, _P) for n in ("dqx", "dqh", "bW", "bR", "gx", "xin", "hq", "xout0",
                                    "xout1")]
                 + [(n, "f4") for n in ("hscale", "xscale0", "xscale1")]
                 + [(n, "i4") for n in ("layer", "dir", "last", "xqi")]
                 + [("xqscale", "f4")], align=True)
SLICE = np.dtype([("blob", "i8")] + [(n, "i4") for n in (
    "k", "j0", "nu", "bs", "b0", "nb", "mpad", "npad", "ts", "ks", "kx", "nxc", "nc", "off_dq",
    "off_own", "off_gx", "off_ring", "ctr")], align=True)


def slices(part: Partition) -> np.ndarray:
    """Every CTA's :class:`~cudnn_rnn.lowbit.partition.Slice` as the kernel's ``Slice``."""
    out = np.zeros(part.grid, dtype=SLICE)
    for i, s in enumerate(part.slices):
        for n in SLICE.names:
            out[i][n] = getattr(s, n)
    return out


def layers(part: Partition, vectors: list, ops: list, hq: list, xin: dict,
           gx: list) -> np.ndarray:
    """Every pseudo-layer's :data:`LAYER` record: the device pointers of its dequantization
    and bias ``vectors`` (dicts of CuPy arrays), its h codes ``hq``, its input codes
    ``xin`` (by pseudo-layer; layer 0's with the input products in the kernel) and the
    layer above's, layer 0's input projection ``gx`` (one a direction, or none), with
    ``part.xq`` the input's size and scale for layer 0 to quantize it (x itself is a launch
    argument, which :meth:`Forward.bind` may change); ``ops``: :func:`operands.prepare`'s
    (the activation scales)."""
    cfg = part.cfg
    pls, by_layer = walk.pseudo_layers(cfg), walk.layers(cfg)
    table = np.zeros(len(pls), dtype=LAYER)
    for p in pls:
        row = table[p.index]
        for n in ("dqx", "dqh", "bW", "bR"):
            row[n] = vectors[p.index][n].data.ptr
        row["gx"] = gx[p.direction].data.ptr if p.layer == 0 and gx else 0
        row["xin"] = xin[p.index].data.ptr if p.index in xin else 0
        row["hq"] = hq[p.index].data.ptr
        readers = by_layer[p.layer + 1] if p.layer + 1 < cfg.num_layers else []
        for i, r in enumerate(readers):
            row[f"xout{i}"] = xin[r.index].data.ptr
            row[f"xscale{i}"] = ops[r.index].input.act_scale
        row["last"] = int(not readers)
        row["hscale"] = ops[p.index].recurrent.act_scale
        row["layer"], row["dir"] = p.layer, p.direction
        if part.xq and p.layer == 0:
            row["xqi"], row["xqscale"] = cfg.input_size, ops[p.index].input.act_scale
    return table


def waits(part: Partition) -> np.ndarray:
    """int32 ``(grid, T, MAX_WAITS, 2)``: before step s, CTA c waits until counter
    ``[c, s, i, 0]`` reaches ``[c, s, i, 1]`` (counter -1: no wait). A group's counter
    counts its CTAs' finished steps, hx's slot counting as one: slot ``s`` of h (what
    step s reads) is whole at ``(s + 1) * units``. In clusters (``part.cluster``) a CTA's
    own group is its cluster, met at the cluster barrier: only the feeders' counters."""
    cfg = part.cfg
    T = cfg.seq_length
    pls = walk.pseudo_layers(cfg)
    table = np.full((part.grid, T, MAX_WAITS, 2), -1, dtype=np.int32)
    rows: dict = {}  # a CTA's waits depend on its pseudo-layer and batch slice only
    for c, sl in enumerate(part.slices):
        if (sl.k, sl.bs) not in rows:
            rows[(sl.k, sl.bs)] = _waits(part, pls[sl.k], sl.bs)
        table[c] = rows[(sl.k, sl.bs)]
    return table


def _waits(part: Partition, p, bs: int) -> np.ndarray:
    """(T, MAX_WAITS, 2) of :func:`waits` for a CTA of pseudo-layer ``p``, batch slice
    ``bs``."""
    cfg, k = part.cfg, p.index
    T = cfg.seq_length
    out = np.full((T, MAX_WAITS, 2), -1, dtype=np.int32)
    feeders = walk.feeders(cfg, p)
    for s in range(T):
        row = [] if part.cluster else [(part.counter(k, bs), (s + 1) * part.units[k])]
        t = p.time(s, T)
        for f in feeders:  # their step at time t wrote slot step+1
            row.append((part.counter(f.index, bs), (f.step(t, T) + 2) * part.units[f.index]))
        if row:
            out[s, :len(row)] = row
    return out


def gate_rows(part: Partition, s) -> np.ndarray:
    """int ``(gates, nu)``: the row of slice ``s``'s weight rows that holds gate q of its unit
    u (as the kernel reads them): gate-major (``q * nu + u``), or with ``part.reg_gates``
    so that warp w of a warpgroup (rows 16w .. 16w+15 of the instruction's 64, a thread's
    rows r and r + 8) holds units 4w .. 4w+3, gates 0 and 2 of unit 4w + r in rows r and
    r + 8 (r < 4), gates 1 and 3 in rows r + 4 and r + 12: a lane and the lane 16 apart
    hold the four gates of a unit between them."""
    q, u = np.meshgrid(np.arange(part.cfg.gates), np.arange(s.nu), indexing="ij")
    if not part.reg_gates:
        return q * s.nu + u
    return 16 * (u >> 2) + 4 * (q & 1) + 8 * (q >> 1) + (u & 3)


def blob(part: Partition, input_codes: list, recurrent_codes: list) -> np.ndarray:
    """uint8: every CTA's weight rows, in its shared-memory layout, back to back (rows of
    ``rowb`` bytes; with ``part.wg_shared`` wgmma's canonical layout, :func:`rows` reads
    either back).
    ``input_codes[k]`` / ``recurrent_codes[k]``: pseudo-layer k's (gates*H, in) and
    (gates*H, H) codes (numpy, the operand dtype; layer 0's input codes are used only with
    ``part.input_inside``)."""
    H = part.cfg.hidden_size
    out = np.zeros(sum(s.mpad * s.rowb for s in part.slices), dtype=np.uint8)
    for s in part.slices:
        rows = out[s.blob:s.blob + s.mpad * s.rowb].reshape(s.mpad, s.rowb)
        xb = s.nxc * CHUNK
        for (q, u), r in np.ndenumerate(gate_rows(part, s)):
            src = q * H + s.j0 + u
            if xb:
                w = np.ascontiguousarray(input_codes[s.k][src]).view(np.uint8)
                rows[r, :w.size] = w
            rc = np.ascontiguousarray(recurrent_codes[s.k][src]).view(np.uint8)
            rows[r, xb:xb + rc.size] = rc
        if part.wg_shared:  # as wgmma reads A: its canonical layout, the padding after it
            flat = out[s.blob:s.blob + s.mpad * s.rowb]
            flat[:] = np.concatenate([wgmma.pack(rows[:, :s.nc * CHUNK].copy(), "k"),
                                      np.zeros(s.mpad * PAD, np.uint8)])
    return out


def rows(part: Partition, blob_: np.ndarray, s) -> np.ndarray:
    """Slice ``s``'s weight rows from the blob, ``(mpad, nc * CHUNK)`` bytes, whichever
    layout :func:`blob` wrote them in."""
    flat = blob_[s.blob:s.blob + s.mpad * s.rowb]
    kb = s.nc * CHUNK
    if not part.wg_shared:
        return flat.reshape(s.mpad, s.rowb)[:, :kb]
    r, k = np.meshgrid(np.arange(s.mpad), np.arange(kb), indexing="ij")
    return flat[wgmma.offset(r, k, *wgmma.strides(s.mpad, kb, "k"))]
