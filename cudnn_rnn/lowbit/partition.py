"""How the persistent kernel divides a network among its thread blocks, what each keeps on
chip, and when each may take its next step: decided here, on the host, in plain Python, so
that a CPU test can check every part of it (tests/persistent_model.py runs it in float64).

**One launch, every pseudo-layer resident.** Each thread block (CTA) owns a *slice*: one
pseudo-layer ``k``, a run of ``nu`` hidden units ``j0 .. j0+nu-1`` of every gate, and one
*batch slice* ``b0 .. b0+nb-1``. It keeps the rows of its units, ``[W | R]`` (gate-major:
row ``q*nu + u`` is gate q of unit ``j0+u``), in shared memory for the whole sequence, in
the operand formats (``fx`` for the input part of layers above the first, ``fh`` for the
recurrent part; layer 0's input projection is the cuBLASLt input GEMM's, computed before
the launch, or with ``input_inside`` layer 0 multiplies its input codes as a layer above
does, ``fx`` their format too). A step: stage the state (the previous layer's output at
this time, then h of the previous step) in slabs, multiply on tensor cores, dequantize, add
the input projection and the biases, do the gate math in FP32, write h in the formats its
readers take.

**Dataflow, not a lockstep barrier.** Every step's state goes to its own slot in global
memory (never overwritten within a launch), and each (pseudo-layer, batch slice) *group*
has one counter its CTAs increment after each step (once more after writing hx into slot
0). A CTA waits only for what it reads: its own group's previous step, and for a layer
above the first, the step of each direction of the layer below that produced this time.
So layers run as a wavefront (layer 1 at time t beside layer 0 at time t+1) and a
bidirectional layer follows the whole layer below as its data arrive.
:func:`cudnn_rnn.lowbit.tables.waits` writes these targets into a table the kernel reads;
the kernel holds no schedule of its own. In thread-block clusters (``cluster``) each group
is one cluster, whose CTAs meet at the cluster's barrier instead of at their counter.

**Sizes.** K is counted in bytes, in 32-byte *chunks* (one ``mma.sync`` k-step: k16 in 16
bits, k32 in 8), so every format shares one layout. The warps of a CTA split the output
tiles (``ts`` groups of ``ntw`` n-tiles, all m-tiles each) and K (``ks`` groups of chunks),
and the k-groups' partial sums meet in shared memory. Above the first layer the first ``kx``
k-groups take the input part's chunks and the others the recurrent part's, so that no group
straddles the two (each dequantizes its sums by one factor, and the kernel keeps no second
set of accumulators); only a CTA with a single k-group straddles.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine import walk
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import fits, wgmma
from cudnn_rnn.lowbit.cta import (CHUNK, FORMAT_BYTES, PAD, Slice,  # noqa: F401 (its API)
                                  pstride, row_bytes)
from cudnn_rnn.lowbit.fits import DoesNotFit, _up  # one rounding up, the limits' own
from cudnn_rnn.lowbit.launch import SLABS

SLAB = 4  # chunks a k-group stages per pipeline stage (bulk staging may take fewer: SLABS)
MAX_RING = 32  # stages of a bulk ring at most (two mbarriers each: the kernel's STATIC_SMEM)
STAGES = (2, 6)  # the staging ring's depth (bulk staging may go deeper: plan)
MAX_WAITS = 3  # counters one step waits on: its own group and at most two feeding directions
MAX_ACC = 16  # m-tiles x n-tiles one warp accumulates (4 registers each, twice with an x part)
MAX_NTW = 4
NTW_SHARE = 2  # n-tiles a warp takes at least, sharing each A fragment (the probe tool's --ntw)


@dataclass
class Partition:
    """Every CTA's slice, the kernel's compile-time shape and the wait table."""
    cfg: RNNConfig
    fx: str | None  # input-part format of layers above the first (None: one layer)
    fh: str
    threads: int
    batch_slices: int
    slices: list
    mt_max: int
    ntw: int
    stages: int
    hrowb: int  # bytes of one row of h codes
    xrowb: int  # bytes of one row of a layer input's codes (layers above the first)
    groups: dict = field(default_factory=dict)  # (k, bs) -> counter index
    units: dict = field(default_factory=dict)  # k -> CTAs per batch slice
    # AREG: slabs of weight fragments each warp keeps in registers for the whole sequence
    # (0: it reads them from shared memory at every step)
    areg_slabs: int = 0
    cluster: int = 0  # CTAs of a cluster, one per group (0: none; see plan)
    # wgmma (sm_90a): the slabs a warpgroup multiplies a step (0: mma.sync); a warpgroup
    # takes one part of K, its four warps 16 rows each; A from registers (its fragments
    # loaded once) or, with wg_shared, from the weight rows in shared memory, laid out as
    # wgmma reads them (tables.blob)
    wg_slabs: int = 0
    wg_shared: bool = False
    wg_blocks: int = 1  # instructions of 64 weight rows a warpgroup issues a chunk
    wg_bulk: bool = False  # the state in wgmma's layout in global memory, a slab one copy
    mcast: int = 0  # CTAs of a cluster (of one group) sharing each slab's copy (0: none)
    gx_global: bool = False  # layer 0's input projection read from global memory (GXG)
    reg_gates: bool = False  # the gate math on the sums in registers (GR, fits.register_gates)
    per_sm: int = 1  # CTAs a multiprocessor holds at once (the kernel's MINB)
    input_inside: bool = False  # layer 0's input part multiplied in the kernel (no projection)
    slab: int = SLAB  # chunks a k-group stages per pipeline stage (bulk staging: a copy's)
    prefetch: bool = False  # the input part's next step copied ahead (PREX, fits.prefetch)
    xq: int = 0  # layer 0's input codes written by the kernel, units a worker (XQ; 0: before)
    # bulk staging: k-group 0's ring stages where they differ from the other group's
    # ``stages`` (the kernel's STAGES0; 0: the same): see plan
    stages0: int = 0

    def chunks_per_group(self) -> int:
        """The most chunks of K one k-group of any CTA multiplies."""
        return max(len(s.chunks(g)) for s in self.slices for g in range(s.ks))

    @property
    def grid(self) -> int:
        return len(self.slices)

    @property
    def cluster_size(self) -> int:
        """CTAs of one thread-block cluster of the launch: a group's, or mates sharing copies."""
        return self.cluster or self.mcast

    @property
    def smem(self) -> int:
        """Dynamic shared memory every CTA asks for: the largest slice's."""
        return max(s.smem for s in self.slices)

    def counter(self, k: int, bs: int) -> int:
        return self.groups[(k, bs)]

    @property
    def straddles(self) -> bool:
        """Whether some CTA's k-group multiplies both parts: the kernel then keeps the input
        part's sums apart in a second set of accumulators (``STRADDLE``)."""
        return any(s.straddles for s in self.slices)

    @property
    def exact(self) -> bool:
        """Whether every CTA fills the kernel's tiles (``MT`` m-tiles, ``ts * ntw`` n-tiles of
        8 rows): the kernel then checks no tile's bounds (``EXACT``)."""
        return all(s.mpad == 16 * self.mt_max and s.ts * self.ntw * 8 == s.npad
                   for s in self.slices)

    def state_bytes(self, slots: int, rowb: int) -> int:
        """Bytes of a state buffer of ``slots`` slots (h: T + 1; a layer input: T) of rows of
        ``rowb`` bytes: B rows a slot; with ``wg_bulk`` every batch slice's padded rows in
        wgmma's layout, and a tail of zeros for the bulk copies that run past a row's last
        chunk (a group's slabs past its chunks: they multiply zero A)."""
        if not self.wg_bulk:
            return slots * self.cfg.mini_batch * rowb
        npad = self.slices[0].npad
        return (slots * self.batch_slices * npad * rowb
                + self.wg_slabs * self.slab * CHUNK * npad)

    def weight_bytes(self) -> int:
        """Bytes of weight rows on chip in all (padding included)."""
        return sum(s.mpad * s.rowb for s in self.slices)

    def step_bytes(self) -> dict:
        """What a launch shape trades, per step at its busiest CTA: the state it reads from
        global memory, and what its product loop reads from shared memory (each weight row
        once per n-group of warps, each staged state row once). A bulk copy reads whole
        slabs: every padded row, and a group's slabs past its own chunks."""
        weights = not (self.areg_slabs or self.wg_slabs and not self.wg_shared)  # registers
        share = max(1, self.mcast)  # a shared copy: each CTA reads its share of the slabs
        return {"state_read_bytes": max(s.ks * -(-self.wg_slabs // share) * self.slab * CHUNK
                                        * s.npad
                                        if self.wg_bulk else s.nb * s.nc * CHUNK
                                        for s in self.slices),
                "shared_read_bytes": max(s.nc * CHUNK * (s.mpad * s.ts * weights + s.npad)
                                         for s in self.slices)}


def _units(cfg: RNNConfig, ctas: int, work: list[int]) -> list[int]:
    """CTAs per pseudo-layer (within one batch slice), in proportion to each one's work."""
    total = sum(work)
    return [max(1, min(cfg.hidden_size, ctas * w // total)) for w in work]


def plan(cfg: RNNConfig, fx: str | None, fh: str, *, sm_count: int, smem_per_block: int,
         ctas: int | None = None, batch_slices: int = 1, threads: int = 256,
         areg: bool = False, cluster: int = 0, units: int = 0, wg: bool = False,
         bulk: bool = False, mcast: int = 0, gx_global: bool = False,
         reg_gates: bool = False, per_sm: int = 1, input_inside: bool = False,
         slab: int = SLAB, prefetch: bool = False, quantize: bool = False) -> Partition:
    """The partition of ``cfg`` over ``ctas`` CTAs (at most ``per_sm`` per multiprocessor,
    all resident; ``smem_per_block`` each one's share) in ``batch_slices`` batch slices;
    :class:`DoesNotFit` says why it cannot run. ``areg``: each warp keeps its weight
    fragments in registers (the kernel's ``AREG``): its warps take as many n-tiles each as
    they may, so that more of them split K and each k-group's fragments fit
    ``fits.AREG_REGS`` registers.
    ``cluster``: each group (pseudo-layer, batch slice) one cluster of that many CTAs (how
    many clusters this GPU holds at once is the engine's check). ``units``: the hidden units
    of every CTA in every pseudo-layer (a multiple of 4; 0: in proportion to each one's
    work). ``wg``: the products on wgmma (:func:`cudnn_rnn.lowbit.fits.warpgroups` says what
    it takes); ``bulk`` (with it): the state in wgmma's layout, a slab one bulk copy; with
    bulk, ``mcast``: clusters of that many CTAs share each copy (fits.shared_copies),
    ``gx_global``: layer 0's input projection not staged (GXG), ``reg_gates``: the gate
    math on the sums in registers (GR, fits.register_gates), ``input_inside``: layer 0's
    input part of K multiplied in the kernel as a layer above's (``fx`` its format),
    ``slab``: the chunks of one bulk copy (a ring stage; smaller: more stages in the same
    bytes, more copies in flight while a warpgroup multiplies one), ``prefetch``: the input
    part's first stages of the next step copied once a step's products are done
    (fits.prefetch), ``quantize``: layer 0's input codes written by its CTAs
    (fits.quantize_share)."""
    H, B, D, g = cfg.hidden_size, cfg.mini_batch, cfg.dirs, cfg.gates
    ctas = sm_count * per_sm if ctas is None else ctas
    if not 1 <= ctas <= sm_count * per_sm:
        raise DoesNotFit(f"{ctas} CTAs: a persistent launch takes 1 to {sm_count * per_sm} "
                         f"({per_sm} per multiprocessor, all resident)")
    if not 1 <= batch_slices <= B or batch_slices > ctas:
        raise DoesNotFit(f"{batch_slices} batch slices for a batch of {B} on {ctas} CTAs")
    if threads % 32 or not 32 <= threads <= 1024:
        raise DoesNotFit(f"{threads} threads: a whole number of warps up to 1024")
    if slab != SLAB and not bulk:
        raise DoesNotFit(f"slabs of {slab} chunks are bulk staging's: 'wb'")
    if slab not in SLABS:
        raise DoesNotFit(f"slabs of {slab} chunks: one of {', '.join(map(str, SLABS))}")
    pls = walk.pseudo_layers(cfg)
    hrowb = row_bytes(H, fh)
    if input_inside and not bulk:
        raise DoesNotFit("layer 0's input products in the kernel are bulk staging's: 'wbi'")
    if input_inside and fx is None:
        raise DoesNotFit("layer 0's input products in the kernel need the input's format")
    # the input part's row bytes of each pseudo-layer (0: none); xrowb, the largest, is the
    # row of every layer input's codes
    kx = [row_bytes(cfg.input_size if p.layer == 0 else D * H, fx)
          if p.layer or input_inside else 0 for p in pls]
    xrowb = max(kx)
    fits.offsets(cfg, hrowb, xrowb, not input_inside)
    per_slice = ctas // batch_slices
    if per_slice < len(pls):
        raise DoesNotFit(f"{len(pls)} pseudo-layers x {batch_slices} batch slices need at "
                         f"least {len(pls) * batch_slices} CTAs, {ctas} given")
    if units and cluster:
        raise DoesNotFit("a launch in clusters takes H over the cluster's CTAs a CTA; give "
                         "the units or the cluster, not both")
    if units:
        nus = fits.given_units(H, len(pls), batch_slices, units, ctas)
    else:
        counts = fits.clustered(H, len(pls), batch_slices, cluster, ctas) if cluster else \
            _units(cfg, per_slice, [x + hrowb for x in kx])
        nus = [_up(-(-H // u), 4) for u in counts]
        if not cluster and len({_up(g * nu, 16) for nu in nus}) > 1:
            # one tile shape for every CTA (the kernel then checks no bounds, EXACT): the
            # heaviest pseudo-layer's units for all, where the CTAs suffice
            even = [min(nus)] * len(nus)
            if sum(-(-H // nu) for nu in even) <= per_slice:
                nus = even
    counts = [-(-H // nu) for nu in nus]
    warps = threads // 32
    nb_full = -(-B // batch_slices)
    nt_max = _up(nb_full, 8) // 8
    ntw = max(min(NTW_SHARE, nt_max), -(-nt_max // warps))
    if areg:  # fewer warps along n, more along K: fewer weight fragments a warp holds
        ntw = max(ntw, min(MAX_NTW, nt_max))
    if wg:  # a warpgroup takes every n-tile: the instruction's N is the slice's rows
        fits.warpgroups(cfg, fx if xrowb else None, fh, threads, areg, cluster, nt_max)
        ntw = nt_max
    elif ntw > MAX_NTW:
        raise DoesNotFit(f"a batch slice of {nb_full} needs {ntw} n-tiles per warp "
                         f"with {warps} warps (at most {MAX_NTW}); slice the batch more")
    slots = 4 if reg_gates and g == 3 else g  # 'e': a GRU's rows as an LSTM's, one slot zero
    mt_max = max(_up(slots * nu, 16) // 16 for nu in nus)
    ntw = ntw if wg else 1 << (ntw - 1).bit_length()  # mma.sync: a power of two
    if mt_max * ntw > MAX_ACC and not wg:
        raise DoesNotFit(f"{mt_max} m-tiles x {ntw} n-tiles per warp exceed the {MAX_ACC} "
                         "accumulator tiles a warp holds; use more CTAs")
    if B - (batch_slices - 1) * nb_full <= 0:
        raise DoesNotFit(f"batch {B} in {batch_slices} slices of {nb_full} leaves one empty")
    def ring(stages: int, stages0: int = 0) -> Partition:
        part = Partition(cfg, fx if xrowb else None, fh, threads, batch_slices,
                         [], mt_max, ntw, stages, hrowb, xrowb, gx_global=gx_global,
                         reg_gates=reg_gates, per_sm=per_sm, input_inside=input_inside,
                         slab=slab, stages0=stages0)
        _fill(part, pls, nus, counts, nb_full, kx, warps, fh if wg else None, slots)
        return part
    for stages in range(STAGES[1], STAGES[0] - 1, -1):  # the deepest ring that fits
        part = ring(stages)
        if part.smem <= smem_per_block or stages == STAGES[0]:
            break
    if bulk and not wg:
        raise DoesNotFit("bulk staging feeds wgmma: 'b' after 'w'")
    if gx_global and not bulk:
        raise DoesNotFit("the input projection from global memory is bulk staging's: 'wbg'")
    wgs = fits.wg_slabs(part, slab, FORMAT_BYTES) if wg else None  # not the ring's depth
    # bulk staging: a ring up to a step's slabs deep, the deepest that fits (past the ring,
    # a warpgroup refills a stage once its products are done: fits.bulk)
    if bulk:
        for stages in range(min(wgs[0], MAX_RING), part.stages, -1):
            deeper = ring(stages)
            if deeper.smem <= smem_per_block:
                part = deeper
                break
        # a ring shallower than a step, 3 stages deep or more: what room is left past it
        # takes one stage more for the group past the first (the recurrent part's, with the
        # input inside: its copies wait for the step before, the input part's for nothing).
        # Where it was measured (docs/lowbit.md, "One stage more for the second group"):
        # one pseudo-layer, the gate math in registers ('e'), one CTA a multiprocessor. Not
        # at 2 stages, where group 0's own ring sets the pace; not with shared copies (a
        # ring of a whole step) or copies ahead ('x', whose ring lies group by group); not
        # elsewhere, where the second slab loop's registers were not measured against what
        # it buys (the kernels of a 2-layer bidirectional LSTM at 512/64, 'b1t256u16wbes2' in
        # FP16, spilled 560 bytes with it against 36 without)
        if (len(pls) == 1 and reg_gates and per_sm == 1 and not (mcast or prefetch)
                and 3 <= part.stages < min(wgs[0], MAX_RING)):
            deeper = ring(part.stages + 1, part.stages)
            if deeper.smem <= smem_per_block:
                part = deeper
    part.cluster = cluster
    if areg:
        part.areg_slabs = fits.areg_slabs(part, threads, SLAB)
    if wg:
        part.wg_slabs, part.wg_shared, part.wg_blocks = wgs
        part.wg_bulk = bulk
    need = part.smem
    if need > smem_per_block:
        s = max(part.slices, key=lambda s: s.smem)
        raise DoesNotFit(
            f"a CTA needs {need} bytes of shared memory ({s.mpad * s.rowb} of weights for "
            f"{s.nu} units of pseudo-layer {s.k}, the rest staging), the GPU gives a block "
            f"{smem_per_block}; on-chip weights in all {part.weight_bytes()} bytes on "
            f"{part.grid} CTAs")
    if part.wg_bulk:  # the state buffers in wgmma's layout within the kernel's offsets
        fits.bulk(part, fits.OFFSET_LIMIT)
    if mcast:
        fits.shared_copies(part, mcast)
        part.mcast = mcast
    if reg_gates:
        fits.register_gates(part)
    if prefetch:
        fits.prefetch(part, [(partial_bytes(cfg, s.npad, s.mpad, s.ks, s.nxc, reg_gates),
                              (s.ks - s.kx) * part.stages * s.npad * slab * CHUNK)
                             for s in part.slices])
        part.prefetch = True
    if quantize:
        part.xq = fits.quantize_share(part)
    return part


def _fill(part: Partition, pls, nus, counts, nb_full, kx, warps, wg: str | None, slots) -> None:
    """Every CTA's slice, batch slice by batch slice, pseudo-layer by pseudo-layer."""
    cfg, H, B = part.cfg, part.cfg.hidden_size, part.cfg.mini_batch
    blob = 0
    for bs in range(part.batch_slices):
        b0 = bs * nb_full
        nb = min(nb_full, B - b0)
        for p, nu, count in zip(pls, nus, counts):
            part.units[p.index] = count
            part.groups[(p.index, bs)] = len(part.groups)
            for i in range(count):
                s = replace(_slice(cfg, p, i * nu, min(nu, H - i * nu), _up(slots * nu, 16),
                                   bs, b0, nb, kx[p.index], part.hrowb, warps, part.ntw,
                                   part.stages, blob, wg, 16 * part.mt_max,
                                   part.gx_global or part.input_inside, part.reg_gates,
                                   part.slab, part.stages0),
                            ctr=part.groups[(p.index, bs)])
                blob += s.mpad * s.rowb
                part.slices.append(s)


def _input_groups(ks: int, nxc: int, nc: int) -> int:
    """How many of ``ks`` k-groups take the input part's ``nxc`` chunks (the rest the
    recurrent part's): the split whose longest run of chunks is shortest, at least one group
    on each part, nearest in proportion on a tie; 0 where there is no input part or one
    group (it then takes all of K)."""
    if not nxc or ks < 2:
        return 0
    longest = lambda kx: max(-(-nxc // kx), -(-(nc - nxc) // (ks - kx)))  # noqa: E731
    return min(range(1, ks), key=lambda kx: (longest(kx), abs(kx - ks * nxc / nc)))


def partial_bytes(cfg: RNNConfig, npad: int, mpad: int, ks: int, nxc: int,
                  reg_gates: bool) -> int:
    """Bytes of a CTA's partial sums, which overlay its ring once the products are done;
    with the gate math in registers only the warpgroups' trade: 2 x 4 warps x npad / 16
    blocks x 4 values x 32 lanes (persistent.cu's GR)."""
    split = nxc and cfg.mode == RNNMode.GRU  # GRU keeps the input part's sums apart
    return npad * 256 if reg_gates else (2 if split else 1) * ks * pstride(mpad) * npad * 4


def _slice(cfg, p, j0, nu, mpad, bs, b0, nb, kxb, hrowb, warps, ntw, stages, blob,
           wg: str | None = None, rows_max: int = 0, gx_global: bool = False,
           reg_gates: bool = False, slab: int = SLAB, stages0: int = 0) -> Slice:
    """``mpad``: the rows of the pseudo-layer's full slices (a last slice of fewer units
    takes as many, its rows past ``gates * nu`` zero, so that its tiles are theirs).
    ``wg`` (the operand format): a k-group is a warpgroup of four warps, each on every
    n-tile, the batch rows padded to a width its wgmma takes, and room for the rows of the
    instructions of the partition's largest slice (``rows_max`` rows: its WGM is every
    CTA's) and their zeros. ``stages0``: k-group 0's ring stages where not ``stages``."""
    npad = wgmma.width(wg, _up(nb, 8)) if wg else _up(nb, 8)
    ts = 1 if wg else -(-(npad // 8) // ntw)
    ks = max(1, warps // 4 if wg else warps // ts)
    nxc, nc = kxb // CHUNK, (kxb + hrowb) // CHUNK
    kx = _input_groups(ks, nxc, nc)
    rowb = nc * CHUNK + PAD
    # wgmma: the rows of the whole instructions (64 each), then the zeros the kernel reads as
    # A past a group's chunks
    off_dq = _up(_up(rows_max, fits.WG_ROWS) * rowb + fits.wg_zero(npad) if wg else mpad * rowb,
                 16)
    off_own = off_dq + 4 * mpad * 4  # dequantization and biases per row
    # h and c of its units (with the gate math in registers, held there)
    off_gx = _up(off_own + (0 if reg_gates else 2 * npad * nu * 4), 16)
    # a step's input projection (none read from global memory, or multiplied in the kernel)
    gx = cfg.gates * nb * nu * 4 if p.layer == 0 and not gx_global else 0
    off_ring = _up(off_gx + gx, 16)
    stage = npad * (slab * CHUNK + (0 if wg else PAD))  # wgmma's: no padding
    ring = ((stages0 or stages) + (ks - 1) * stages) * stage
    partials = partial_bytes(cfg, npad, mpad, ks, nxc, reg_gates)
    return Slice(p.index, j0, nu, bs, b0, nb, mpad, npad, ts, ks, kx, nxc, nc, blob, off_dq,
                 off_own, off_gx, off_ring, off_ring + max(ring, partials))

