"""What a launch shape of the persistent kernel must keep to, each refusal a
:class:`DoesNotFit` that says what is short, in bytes or counts: the limits of the kernel's
registers, offsets, clusters and wgmma, checked by :func:`cudnn_rnn.lowbit.partition.plan`."""
from __future__ import annotations

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import RNNConfig

MAX_CLUSTER = 16  # CTAs of a thread-block cluster: 8 portable, 16 on sm_90 (non-portable)
AREG_REGS = 64  # registers a thread may give a k-group's weight fragments (AREG, WG)
# ... and those with the accumulators: past 96 ptxas spilled (a helper's compile of 2,106
# partitions); the engine refuses a kernel that spills all the same (its local memory)
AREG_HELD = 96
WG_ROWS = 64  # wgmma: the weight rows one instruction takes (a warpgroup, 16 rows a warp)
WG_BLOCKS = 2  # ... the instructions a warpgroup issues a chunk, 64 rows each
WG_ACC = 64  # ... the registers a thread gives their sums (N / 2 each)
WG_ZERO = 2048  # ... and the zeros it reads as A past a k-group's chunks (64 rows x 32 bytes)


def wg_zero(npad: int) -> int:
    """Bytes of zeros a wgmma CTA reads past a group's chunks: as A (64 rows x 32 bytes) or,
    with bulk staging, as B (its npad rows x 32 bytes): persistent.cu's WGZ."""
    return max(WG_ZERO, 32 * npad)
OFFSET_LIMIT = 2 ** 31  # the kernel indexes its buffers with 32-bit offsets


class DoesNotFit(ValueError):
    """A partition that cannot run: the message says what is short, in bytes or counts."""


def _up(n: int, m: int) -> int:
    return -(-n // m) * m


def clustered(H: int, pls: int, batch_slices: int, cluster: int, ctas: int) -> list[int]:
    """CTAs per pseudo-layer in clusters of ``cluster``: one cluster a group."""
    need = pls * batch_slices * cluster
    if not 1 <= cluster <= MAX_CLUSTER:
        raise DoesNotFit(f"a cluster of {cluster} CTAs: 1 to {MAX_CLUSTER}")
    if -(-H // _up(-(-H // cluster), 4)) != cluster:
        raise DoesNotFit(f"H {H} does not split into {cluster} CTAs of 4k units each")
    if need > ctas:
        raise DoesNotFit(f"{pls} pseudo-layers x {batch_slices} batch slices x {cluster} "
                         f"CTAs a cluster: {need} CTAs, {ctas} available")
    return [cluster] * pls


def given_units(H: int, pls: int, batch_slices: int, units: int, ctas: int) -> list[int]:
    """``units`` a CTA in every pseudo-layer, where they make a partition."""
    if units % 4 or not 4 <= units <= _up(H, 4):
        raise DoesNotFit(f"{units} units a CTA: a multiple of 4 from 4 to {_up(H, 4)}")
    need = pls * batch_slices * -(-H // units)
    if need > ctas:
        raise DoesNotFit(f"{units} units a CTA: {pls} pseudo-layers x {batch_slices} batch "
                         f"slices x {-(-H // units)} CTAs = {need} CTAs, {ctas} available")
    return [units] * pls


def offsets(cfg: RNNConfig, hrowb: int, xrowb: int, projection: bool = True) -> None:
    """:class:`DoesNotFit` where a buffer the kernel indexes is too large for its offsets
    (``projection``: layer 0's input projection is one of them)."""
    T, B = cfg.seq_length, cfg.mini_batch
    sizes = {"the input projection's values": T * B * cfg.gates * cfg.hidden_size * 4}
    sizes = sizes if projection else {}
    sizes.update({"h's slots (bytes)": (T + 1) * B * hrowb,
                  "a layer input's codes": T * B * xrowb,
                  "y's values": T * B * cfg.dirs * cfg.hidden_size * 4})
    for what, n in sizes.items():
        if n >= OFFSET_LIMIT:
            raise DoesNotFit(f"{what}: {n} bytes, beyond the kernel's 32-bit offsets "
                             f"({OFFSET_LIMIT}); run fewer steps or a smaller batch per call")


def areg_slabs(part, threads: int, slab: int) -> int:
    """The slabs (of ``slab`` chunks) of weight fragments a warp holds for AREG (``part`` a
    Partition), or :class:`DoesNotFit` with the registers they would take."""
    if threads > 256:  # 65536 registers a multiprocessor: 128 a thread at 512 threads
        raise DoesNotFit(f"weight fragments in registers need at most 256 threads a CTA "
                         f"(up to 255 registers a thread), {threads} given")
    mt_max, ntw = part.mt_max, part.ntw
    slabs = -(-part.chunks_per_group() // slab)
    regs = mt_max * slabs * slab * 4
    held = regs + mt_max * ntw * 4 * (2 if part.straddles else 1)
    if regs > AREG_REGS or held > AREG_HELD:
        raise DoesNotFit(f"a warp's weight fragments take {regs} registers a thread "
                         f"({mt_max} m-tiles x {slabs * slab} chunks x 4; at most "
                         f"{AREG_REGS}), {held} with its accumulators (at most "
                         f"{AREG_HELD}): 8-bit weights, more CTAs or fewer batch rows a "
                         f"slice")
    return slabs


def warpgroups(cfg: RNNConfig, fx: str | None, fh: str, threads: int, areg: bool,
                cluster: int, nt_max: int) -> None:
    """:class:`DoesNotFit` where the wgmma products cannot take a launch: one instruction
    type (both parts of K in one format), two warpgroups of a CTA on two parts of K, at most
    ``2 * WG_ACC`` batch rows a CTA (the engine checks sm_90a)."""
    fmts = {fh} | ({fx} if fx else set())  # fx: some layer's input part (None: none)
    if len(fmts) > 1:
        raise DoesNotFit(f"wgmma multiplies both parts of K in one format: not "
                         f"{' and '.join(sorted(fmts))}")
    if threads != 256:
        raise DoesNotFit(f"wgmma runs two warpgroups a CTA (256 threads), {threads} given")
    if areg or cluster:
        raise DoesNotFit("wgmma keeps its own weight fragments and counters: not with 'r' "
                         "or clusters")
    if 8 * nt_max > 2 * WG_ACC:
        raise DoesNotFit(f"wgmma keeps a CTA's sums of {8 * nt_max} batch rows in registers "
                         f"(at most {2 * WG_ACC}): slice the batch more")


def wg_slabs(part, slab: int, code_bytes: dict) -> tuple[int, bool, int]:
    """(the slabs of ``slab`` chunks every CTA's warpgroups multiply a step, whether A comes
    from shared memory, the instructions a warpgroup issues a chunk: 64 weight rows each)
    for wgmma (``part`` a Partition), or :class:`DoesNotFit`: one width for every CTA, the
    sums within :data:`WG_ACC` registers. A is in registers (loaded once) where its
    fragments fit :data:`AREG_REGS` (over the CTAs a multiprocessor holds) in 8 bits and
    one instruction a chunk; else (16 bits,
    more chunks a part, more rows) the weight rows stay in shared memory in wgmma's
    canonical layout (``code_bytes``: bytes a code of each format takes)."""
    widths = {s.npad for s in part.slices}
    if len(widths) > 1:
        raise DoesNotFit(f"wgmma takes one width for every CTA: batch slices of "
                         f"{' and '.join(map(str, sorted(widths)))} rows (padded to 8); "
                         f"slice the batch into equal multiples of 8")
    blocks = -(-16 * part.mt_max // WG_ROWS)
    if blocks > WG_BLOCKS:
        raise DoesNotFit(f"wgmma takes {WG_BLOCKS * WG_ROWS} weight rows a CTA, "
                         f"{16 * part.mt_max} given: fewer units a CTA (u<units>) or more CTAs")
    if blocks * widths.pop() // 2 > WG_ACC:
        raise DoesNotFit(f"wgmma's sums of {blocks * WG_ROWS} rows by {part.slices[0].npad} "
                         f"batch rows take {blocks * part.slices[0].npad // 2} registers a "
                         f"thread (at most {WG_ACC}): fewer units a CTA or more batch slices")
    slabs = -(-part.chunks_per_group() // slab)
    if part.straddles:  # two groups, one a part (layer 0: K in halves): a planning bug
        raise AssertionError("a wgmma partition whose k-group straddles both parts of K")
    # CTAs sharing a multiprocessor share its registers: fragments within their share
    shared = (code_bytes[part.fh] != 1 or slabs * slab * 4 > AREG_REGS // part.per_sm
              or blocks > 1)
    return slabs, shared, blocks


def bulk(part, limit: int) -> None:
    """:class:`DoesNotFit` where bulk staging cannot take a wgmma partition: the state
    buffers (every slice's padded rows) beyond the kernel's offsets (``limit``). Any ring
    of two stages or more takes it: a warpgroup waits for each slab just before its
    products, and where the ring holds fewer than a step's slabs, refills the stage of the
    slab before once its products are done (the partition's rings are at least
    ``partition.STAGES[0]`` deep)."""
    cfg = part.cfg
    for what, slots, rowb in (("h's slots", cfg.seq_length + 1, part.hrowb),
                              ("a layer input's codes", cfg.seq_length, part.xrowb)):
        if part.state_bytes(slots, rowb) >= limit:
            raise DoesNotFit(f"{what} in wgmma's layout: {part.state_bytes(slots, rowb)} "
                             f"bytes, beyond the kernel's 32-bit offsets ({limit})")


def register_gates(part) -> None:
    """:class:`DoesNotFit` where the gate math cannot take the sums in registers (the
    kernel's ``GR``; :func:`cudnn_rnn.lowbit.tables.gate_rows` lays out the rows): a warp's
    16 rows of an instruction are its four units' four gates (a GRU's three, the fourth
    slot zero), so an LSTM or a GRU with 16 units in every CTA and one instruction of 64
    rows; the two warpgroups trade half their sums, so a batch slice is whole blocks of 16
    columns; the ring is bulk staging's."""
    if not part.wg_bulk:
        raise DoesNotFit("the gate math in registers ('e') is bulk staging's: 'wbe'")
    if part.cfg.mode not in (RNNMode.LSTM, RNNMode.GRU):
        raise DoesNotFit(f"the gate math in registers takes an LSTM's or a GRU's gates, a "
                         f"unit's in one lane and the lane 16 apart, not {part.cfg.mode.name}")
    units = sorted({s.nu for s in part.slices})
    if units != [16] or part.wg_blocks != 1:
        raise DoesNotFit(f"the gate math in registers takes 16 units in every CTA (u16 and H a "
                         f"multiple of 16), not {' and '.join(map(str, units))}")
    if part.slices[0].npad % 16:
        raise DoesNotFit(f"the gate math in registers splits a batch slice between two "
                         f"warpgroups, each whole blocks of 8 columns: {part.slices[0].npad} "
                         f"padded rows, not a multiple of 16")


def shared_copies(part, mcast: int) -> None:
    """:class:`DoesNotFit` where clusters of ``mcast`` CTAs cannot share each slab's copy
    (the kernel's ``MCAST``): a copy lands at one offset in every mate's ring, so mates are
    CTAs of one group (pseudo-layer, batch slice) whose rings lie alike; and it waits for
    nothing but the counters (a mate's ring is free once the mate has signalled its step),
    so the ring holds a whole step's slabs (no refill within a step)."""
    if not part.wg_bulk:
        raise DoesNotFit("a shared copy ('m') is a bulk copy: 'wb' first")
    if not 2 <= mcast <= MAX_CLUSTER:
        raise DoesNotFit(f"{mcast} CTAs sharing a copy: 2 to {MAX_CLUSTER}")
    if part.stages < part.wg_slabs:
        raise DoesNotFit(f"a shared copy needs a ring of a whole step ({part.wg_slabs} slabs); "
                         f"{part.stages} stages fit in shared memory")
    odd = sorted(k for k, n in part.units.items() if n % mcast)
    if odd:
        raise DoesNotFit(f"pseudo-layer {odd[0]} takes {part.units[odd[0]]} CTAs a batch "
                         f"slice, not clusters of {mcast}")
    same = lambda s: (s.k, s.bs, s.off_ring, s.ks, s.npad, s.nxc, s.nc)  # noqa: E731
    for i in range(0, part.grid, mcast):
        if len({same(s) for s in part.slices[i:i + mcast]}) > 1:
            raise DoesNotFit(f"CTAs {i}..{i + mcast - 1} do not stage alike (a last CTA of "
                             f"fewer units): no shared copy")


def prefetch(part, room: list[tuple[int, int]]) -> None:
    """:class:`DoesNotFit` where the next step's input part cannot be copied ahead (the
    kernel's ``PREX``): its first ring stages are copied once a step's products are done,
    before the gate math, the signal and the next step's wait, so the input is layer 0's,
    written before the launch or (``'q'``) by the kernel three steps ahead (the input
    products in the kernel, one layer: a layer above waits for the one below), its
    warpgroups wait for nothing of their own (each warpgroup's own wait, no shared copies),
    and the partial sums overlay only the recurrent part's stages (the ring laid out group
    by group, the input part's groups first): ``room``, each slice's (bytes of its partial
    sums, bytes of its recurrent part's stages). (With the input inside, wgmma's two
    warpgroups are one a part: :func:`warpgroups`.)"""
    if not part.input_inside:
        raise DoesNotFit("the input part copied a step ahead ('x') is the input products' "
                         "in the kernel: 'wbix'")
    if part.cfg.num_layers != 1:
        raise DoesNotFit(f"the input part copied a step ahead ('x') takes one layer (its input "
                         f"written before its step), not {part.cfg.num_layers}: a layer "
                         "above waits for the one below")
    if part.mcast:
        raise DoesNotFit("the input part copied a step ahead ('x') is each warpgroup's own "
                         "wait's, without shared copies ('m')")
    for need, have in room:
        if need > have:
            raise DoesNotFit(f"the input part copied a step ahead ('x') keeps its stages "
                             f"through the gate math: the partial sums ({need} bytes) must "
                             f"fit the recurrent part's stages ({have} bytes)")


XQ_UNITS = 4  # units of 4 values of x a worker may quantize a step (XQ: held in registers
              # from past the step's wait, through its products, to past its signal)


def quantize_workers(threads: int) -> int:
    """The threads of a CTA that quantize layer 0's input (the kernel's XQW): the warps past
    each warpgroup's first, whose threads poll the counters and issue the bulk copies."""
    return threads - threads // 128 * 32


def quantize_share(part) -> int:
    """The units of 4 values of layer 0's input a worker (:func:`quantize_workers`) of the
    kernel quantizes at most a step (its ``XQ``), where layer 0's CTAs write its input codes
    themselves (``'q'``): each CTA of a batch slice's group takes a share of the slice's
    units (``nb`` rows of ``ceil(input / 4)``) in proportion to its units of H, so that
    together they write each once; :class:`DoesNotFit` where the input products are not in
    the kernel, where two directions read the codes (the backward one from the sequence's
    end, long before a forward CTA could write them) or where a share takes more than
    :data:`XQ_UNITS` a worker."""
    cfg = part.cfg
    if not part.input_inside:
        raise DoesNotFit("layer 0's input codes written by the kernel ('q') are for its input "
                         "products there: 'wbiq'")
    if cfg.dirs != 1:
        raise DoesNotFit("layer 0's input codes written by the kernel ('q') take one "
                         "direction: the backward one reads them from the sequence's end")
    H, per = cfg.hidden_size, -(-cfg.input_size // 4)
    shares = [s.nb * per * (s.j0 + s.nu) // H - s.nb * per * s.j0 // H
              for s in part.slices if s.k == 0]
    units = -(-max(shares) // quantize_workers(part.threads))
    if units > XQ_UNITS:
        raise DoesNotFit(f"layer 0's input codes written by the kernel ('q'): a worker's share "
                         f"is {units} units of 4 values a step, at most {XQ_UNITS}")
    return units
