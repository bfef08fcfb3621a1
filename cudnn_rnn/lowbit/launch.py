"""How a persistent launch is shaped (:class:`Settings`) and the shapes the tuner tries
(:data:`SETTINGS`); :mod:`cudnn_rnn.lowbit.persistent` builds and runs them."""
from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace


MAX_PER_SM = 2  # CTAs a multiprocessor the kernel is built for (its launch bounds' MINB)
SLABS = (1, 2, 4)  # chunks a bulk copy may bring ('s'; without it partition.SLAB)


@dataclass(frozen=True)
class Settings:
    """How one launch is shaped: CTAs (None: one per multiprocessor), batch slices (each
    CTA holds the weights of its units for one slice of the batch: more slices, fewer bytes
    of state read per CTA and step, more weight copies on chip) and threads per CTA."""
    ctas: int | None = None
    batch_slices: int = 1
    threads: int = 256
    poll: bool = False  # consumers poll the state itself, not counters (POLL; not tuned yet)
    areg: bool = False  # weight fragments in registers for the whole sequence (AREG; not
                        # tuned yet)
    cluster: int = 0  # CTAs of one thread-block cluster (sm_90): each (pseudo-layer, batch
                      # slice) group is one cluster, whose steps meet at the cluster's
                      # hardware barrier instead of a counter in global memory (0: no clusters)
    units: int = 0  # hidden units a CTA takes in every pseudo-layer (0: the partition's
                    # choice, in proportion to each layer's work); with more batch slices,
                    # the same compute a CTA reads less of the state each step
    wg: bool = False  # the products on wgmma (sm_90a), a warpgroup per part of K, weight
                      # fragments in registers or (16 bits, more rows) shared memory (not
                      # tuned yet)
    bulk: bool = False  # with wg: the state in global memory in wgmma's layout, each slab
                        # staged by one bulk copy on an mbarrier (not tuned yet)
    mcast: int = 0  # with bulk: CTAs of a thread-block cluster (sm_90) of one group that
                    # share each slab's copy, multicast into every mate's ring: the state read
                    # from L2 once for them all (0: each CTA copies its own)
    gx_global: bool = False  # with bulk: layer 0's input projection read by the gate math
                             # from global memory (brought into L2 a step ahead), not staged
                             # in shared memory: room for the ring where it would not fit
    reg_gates: bool = False  # with bulk (LSTM, GRU; 16 units a CTA): the gate math on the sums
                             # in registers, the weight rows laid out so that a thread
                             # holds its unit's four gates (no partial sums in shared memory)
    input_inside: bool = False  # with bulk: layer 0's input products in the kernel as a
                                # layer above's (its input codes written in wgmma's layout
                                # before the launch), no input GEMM and no projection (i)
    per_sm: int = 1  # CTAs a multiprocessor holds at once (each within its share of the
                     # shared memory, a thread within 65536 / (per_sm * threads) registers):
                     # two CTAs of other batch slices on one multiprocessor, one's gate math
                     # and waits beside the other's products (o2); ctas default to per_sm
                     # per multiprocessor
    quantize: bool = False  # with input_inside (one direction): layer 0's input codes
                            # written by its own CTAs three steps ahead, not by a kernel
                            # before the launch (q)
    prefetch: bool = False  # with input_inside (one layer): the input part's first ring
                            # stages of the next step copied as soon as this step's products
                            # are done, in flight through the gate math, the signal and the
                            # next step's wait (x)
    slab: int = 0  # with bulk: chunks of K a bulk copy brings (one ring stage; 0: the
                   # partition's SLAB, 4): fewer, more stages in the same bytes and more
                   # copies in flight while a warpgroup multiplies one (s<chunks>)
    resident: bool = False  # the resident kernel (resident.py; one layer, small batches): each
                            # direction's layer in one thread-block cluster, weights in
                            # registers, h pushed through distributed shared memory (d); of
                            # the rest only the threads apply

    def __post_init__(self):
        if self.resident and any(getattr(self, f.name) != f.default for f in fields(self)
                                 if f.name not in ("threads", "resident")):
            raise ValueError(f"launch shape {self.name}: the resident kernel ('d') takes "
                             "threads only (b1t<threads>d)")
        if self.bulk and not self.wg:
            raise ValueError(f"launch shape {self.name}: bulk staging ('b' after 'w') feeds "
                             "wgmma: name 'w' first")
        if self.mcast == 1:
            raise ValueError(f"launch shape {self.name}: a copy shared by one CTA is not "
                             "shared: 'm2' or more, or no 'm'")
        if self.mcast and not self.bulk:
            raise ValueError(f"launch shape {self.name}: a shared copy ('m') is a bulk "
                             "copy: name 'wb' first")
        if self.gx_global and not self.bulk:
            raise ValueError(f"launch shape {self.name}: the input projection from global "
                             "memory ('g') is for bulk staging: name 'wb' first")
        if self.reg_gates and not self.bulk:
            raise ValueError(f"launch shape {self.name}: the gate math in registers ('e') "
                             "is bulk staging's: name 'wb' first")
        if not 1 <= self.per_sm <= MAX_PER_SM:
            raise ValueError(f"launch shape {self.name}: 1 to {MAX_PER_SM} CTAs a "
                             "multiprocessor ('o')")
        if self.per_sm > 1 and (self.cluster or self.mcast):
            raise ValueError(f"launch shape {self.name}: more CTAs a multiprocessor ('o') "
                             "is not for clusters ('k', 'm')")
        if self.input_inside and not self.bulk:
            raise ValueError(f"launch shape {self.name}: layer 0's input products in the "
                             "kernel ('i') are bulk staging's: name 'wb' first")
        if self.input_inside and self.gx_global:
            raise ValueError(f"launch shape {self.name}: with the input products in the "
                             "kernel ('i') there is no projection to read ('g')")
        if self.quantize and not self.input_inside:
            raise ValueError(f"launch shape {self.name}: layer 0's input codes written by "
                             "the kernel ('q') are for its input products there: name 'i' "
                             "first")
        if self.prefetch and not self.input_inside:
            raise ValueError(f"launch shape {self.name}: the next step's input part copied "
                             "ahead ('x') is the input products' in the kernel: name 'i' "
                             "first")
        if self.slab and not self.bulk:
            raise ValueError(f"launch shape {self.name}: slabs of other sizes ('s') are bulk "
                             "staging's: name 'wb' first")
        if self.slab and self.slab not in SLABS:
            raise ValueError(f"launch shape {self.name}: a bulk copy of {self.slab} chunks: "
                             f"'s' takes one of {', '.join(map(str, SLABS))}")
        if self.wg and (self.poll or self.areg or self.cluster):
            raise ValueError(f"launch shape {self.name}: wgmma ('w') keeps its own weight "
                             "fragments and counters: not with 'p', 'r' or clusters")

    def partition_args(self) -> dict:
        """The keywords :func:`cudnn_rnn.lowbit.partition.plan` takes for this shape."""
        return dict(ctas=self.ctas, batch_slices=self.batch_slices, threads=self.threads,
                    areg=self.areg, cluster=self.cluster, units=self.units, wg=self.wg,
                    bulk=self.bulk, mcast=self.mcast, gx_global=self.gx_global,
                    reg_gates=self.reg_gates, per_sm=self.per_sm,
                    input_inside=self.input_inside,
                    **({"quantize": True} if self.quantize else {}),
                    **({"prefetch": True} if self.prefetch else {}),
                    **({"slab": self.slab} if self.slab else {}))

    @property
    def name(self) -> str:
        ctas = "" if self.ctas is None else f"c{self.ctas}"
        return (f"b{self.batch_slices}{ctas}t{self.threads}" + ("d" if self.resident else "")
                + ("p" if self.poll else "")
                + ("r" if self.areg else "") + (f"u{self.units}" if self.units else "")
                + ("w" if self.wg else "") + ("b" if self.bulk else "")
                + ("g" if self.gx_global else "") + ("e" if self.reg_gates else "")
                + ("i" if self.input_inside else "") + ("q" if self.quantize else "")
                + ("x" if self.prefetch else "")
                + (f"s{self.slab}" if self.slab else "")
                + (f"m{self.mcast}" if self.mcast else "")
                + (f"k{self.cluster}" if self.cluster else "")
                + (f"o{self.per_sm}" if self.per_sm > 1 else ""))

    @classmethod
    def parse(cls, name: str) -> "Settings":
        """The settings :attr:`name` writes as ``name`` (``b2t512``, ``b1c64t256p``,
        ``b1t256r``, ``b2t512u16``, ``b2t256u16w``, ``b2t256u16wbg``, ``b2t256u16wbm2``,
        ``b3t256k16``); ValueError otherwise."""
        m = re.fullmatch(r"b(\d+)(?:c(\d+))?t(\d+)(d?)(p?)(r?)(?:u([1-9]\d*))?(w?)(b?)(g?)(e?)"
                         r"(i?)(q?)(x?)(?:s([1-9]\d*))?(?:m([1-9]\d*))?(?:k([1-9]\d*))?"
                         r"(?:o([1-9]\d*))?",
                         name)
        if m is None:
            raise ValueError(f"no launch shape {name!r}: b<batch slices>[c<CTAs>]t<threads>[d][p]"
                             "[r][u<units a CTA>][w[b[g][e][i[q][x]][s<chunks a copy>]"
                             "[m<CTAs sharing a copy>]]][k<cluster CTAs>][o<CTAs a "
                             "multiprocessor>] (e.g. b1t256, b2t512, b1t256p, b1t256r, "
                             "b2t512u16, b2t256u16w, b2t256u16wb, b2t256u16wbg, b2t256u16wbe, "
                             "b2t256u16wbm2, b3t256k16, b4t256u16wbeo2, b2t256u16wbei, "
                             "b2t256u16wbeis2, b2t256u16wbeiqs2, b2t256u16wbeixs2, b1t256d)")
        return cls(ctas=int(m[2]) if m[2] else None, batch_slices=int(m[1]),
                   threads=int(m[3]), resident=bool(m[4]), poll=bool(m[5]), areg=bool(m[6]),
                   wg=bool(m[8]), bulk=bool(m[9]), gx_global=bool(m[10]),
                   reg_gates=bool(m[11]), input_inside=bool(m[12]), quantize=bool(m[13]),
                   prefetch=bool(m[14]), slab=int(m[15]) if m[15] else 0,
                   mcast=int(m[16]) if m[16] else 0, cluster=int(m[17]) if m[17] else 0,
                   units=int(m[7]) if m[7] else 0, per_sm=int(m[18]) if m[18] else 1)


# what the tuner tries, in order; the first that fits and verifies is the fallback.
# b2t256u16 (two batch slices, 16 units a CTA) measured on an H100 (tools/persistent_probe.py,
# graph replays of one process, ms): at the seed, tree ff4ac25, LSTM INT8 0.1281 against
# b2t512u16 0.1300, GRU INT8 0.1241 against 0.1318, LSTM FP16 0.1652 against 0.1677 (at
# 61e0c91 b2t512u16 was ahead for LSTM FP16, 0.1674 against 0.1700; at 7de7603 b2t256u16
# was 7-13 % under b1t512, the best shape here); at LSTM 50/1/1024/64, tree 61e0c91, a tie
# with b2t256 (INT8 0.3470 against 0.3482, FP16 0.4477 against 0.4480; b1t256 0.3946 and
# 0.5420); at 256/2/256/128 slower (INT8 1.518 against b2t256's 1.274). It joins the list
# and replaces none (b4t256 and b2t512 each won rows of the H200 benchmark); what a fifth
# shape adds to the shipped LSTM's precision table (60 s target, below) is not yet measured
# with it: if that table misses its target because of it, b1t512's reasoning applies.
# Not in it, measured on the H200 (tools/persistent_probe.py, tree fadad4e; graph replay, ms):
# b1t512, 4-11 % faster than b1t256 at the seed shape, LSTM and GRU (LSTM INT8 0.1489
# against 0.1557, FP16 0.1947 against 0.2144) and 2.9-8.5 % at LSTM 50/1/1024/64, but with
# it in this list the shipped LSTM's precision table took 68 s against its 60 s target (47 s
# without it in the next run on the same machine, whose kernel cache the first had filled;
# without it again at d641bc2, on other machines, 62.0 s and 74.8 s: the table's time moves
# between machines more than that, and what the fifth shape itself costs is not yet
# measured); POLL (b1t256p), 34-132 % slower than b1t256 at the same shapes; clusters
# (b2t256k16, b3t256k16: 0.190 and 0.225 against b1t512's 0.142 ms at the seed's LSTM INT8,
# docs/lowbit.md); other units a CTA (b2t512u16 above, b4t256u32).
# ``--settings`` of the tools reaches them.
# b2t256u16wb (wgmma with bulk staging, sm_90a only: refused before any launch elsewhere),
# measured on an H100 (tools/persistent_probe.py, graph replays of one process, ms, tree
# 400df0b): at the seed INT8 LSTM 0.1043 against b2t256u16's 0.1283, GRU 0.1039 against
# 0.1250, E4M3 LSTM 0.1106 against 0.1530; FP16, on a ring 8 stages deep (tree a177a67),
# 0.1208 against 0.1650. At LSTM 50/1/1024/64 'w' was slower than the tuner's shapes (0.3477
# against 0.3339), which stay. Not in it: b2t256u16wbm2 (copies shared by two cluster-mates),
# measured on an H100 (tools/persistent_probe.py, one process, ms, tree b126a7a): seed LSTM
# FP16 0.1226 against wb's 0.1193, INT8 0.0985 against 0.0969, GRU 1-2 % slower; LSTM
# 50/1/1024/64 FP16 0.3239 against 0.3267, INT8 0.2705 against 0.2665 (docs/lowbit.md).
# 'g' (b2t256u16wbg, b1t256u16wbg: layer 0's input projection read from global memory, not
# staged) makes room for bulk staging where the staged projection left none (copies of 4
# chunks; of 2, 'wbes2' below fits FP16 at LSTM 50/1/1024/256). Measured on an
# H100 (tools/persistent_probe.py, quick ranking replays of one process, ms, tree da68c26
# with --variants gx_pg1, the gate math a pair a thread at a time as it is since 23bc5bc):
# LSTM 50/1/1024/256 FP16 0.8157 against b2t256u16's 1.1683; 50/1/2048/128 INT8 0.8246
# (b1t256u16wbg), where no other shape fits. Where 'wb' fits it is slower (seed LSTM FP16
# 0.1233 against 0.1196, INT8 0.1005 against 0.0966; 1024/256 INT8 0.6484 against 0.6293),
# so the tuner tries it only where no bulk-staged shape with the projection staged verified
# and was timed (:func:`not_tried`).
# 'e' (the gate math on the sums in registers; an LSTM or GRU of 16 units a CTA, the other
# cells refused before any compile) measured on an H100 80GB HBM3 against the same shape without
# it (tools/persistent_probe.py, quick ranking replays of one process, ms, tree d2a4104): seed
# LSTM FP16 0.1132 against wb's 0.1205, INT8 0.0892 against 0.0972; LSTM 50/1/1024/256 INT8
# 0.5568 against 0.6280, FP16 (wbge) 0.7552 against wbg's 0.8309; 50/1/2048/128 INT8
# (b1t256u16wbge) 0.7540 against 0.8192; a GRU (tree c9e2d26 with --variants whole_slabs,
# whose copies move the bytes this kernel's do): seed FP16 0.1105 against 0.1219, INT8
# 0.0888 against 0.0988; GRU 50/1/1024/256 INT8 0.4910 against 0.5577, FP16 (wbge) 0.6725
# against wbg's 0.7525. So each bulk shape comes after its 'e' twin and is
# not tried once the twin verified and was timed (:func:`not_tried`).
# 'i' (layer 0's input products in the kernel: no input GEMM) measured on an H100 80GB HBM3
# against the same shape without it (tools/persistent_probe.py, quick ranking replays of one
# process, ms, tree 3c6630c): seed LSTM INT8 b2t256u16wbei 0.0749 against wbe's 0.0850, FP16
# 0.0935 against 0.1083; seed GRU INT8 0.0757 against 0.0848, FP16 0.0933 against 0.1033;
# LSTM 50/1/1024/256 INT8 0.4816 against 0.5146; 50/1/1024/64 INT8 0.2243 against 0.2392
# (FP16 there: 'i' does not fit). So 'wbe' is not tried once 'wbei' verified and was timed
# (:func:`not_tried`); the single-gate cells try 'wbiq' (below: 'wbi' where 'q' is refused
# or the input is wider) and 'wb' both (not measured apart).
# 's2' (bulk copies of 2 chunks: a ring twice as deep) measured on an H100 80GB HBM3 against
# the same shape with copies of 4 (tools/persistent_probe.py, quick ranking replays, three
# processes where two figures are given, ms, tree 19cf688): LSTM 50/1/1024/256 INT8 'wbeis2'
# 0.4497, 0.4471, 0.4464 against 'wbei' 0.4859, 0.4829, 0.4848 (products 4.6 us a step
# against 5.2, traced), GRU 0.4584 against 0.4880; slower where the ring already kept up
# (seed GRU INT8 0.0900 against 0.0760, LSTM 50/1/1024/64 INT8 0.3002 against 0.2266): the
# tuner times both. 'wbes2': LSTM 50/1/1024/256 FP16, where 'wbe' does not fit, 0.7225,
# 0.7226, 0.7228 against 'wbge' 0.7312; slower than 'wbe' wherever both ran (INT8 there
# 0.5436 against 0.5145, GRU FP16 0.6550 against 0.6298, LSTM 50/1/1024/64 INT8 0.2748
# against 0.2395), so not tried once 'wbe' verified. Not in it: 's1' (4.5-37 % slower than
# 's2' or 's4' at every shape measured, 1024/256 INT8 'wbeis1' 0.6111: a wgmma group and a
# wait per 1-chunk slab, products 7.5 us a step); 'wbges2' (LSTM 50/1/2048/128 INT8 0.7359
# against 'wbge' 0.7216).
# 'b1t256u16wbes2' (one batch slice, copies of 2 chunks: a ring of three where two slices'
# shapes do not fit) measured on an H100 80GB HBM3 (tools/persistent_probe.py, quick ranking
# replays of one process, ms, tree cc947b7): LSTM 50/1/2048/128 INT8 0.6962 against
# 'b1t256u16wbge' 0.7181, so the 'g' shapes, after it, are not tried once it verified; not
# tried where a shape of two slices verified (:func:`not_tried`).
# Not in it: 'x' (the input part's first stages of the next step copied as soon as a step's
# products are done; one layer, with 'i'), its GPU tests passed (tree cc947b7) and slower
# than the fastest shape without it at every shape measured (the same probe, ms): LSTM
# 50/1/1024/256 INT8 'wbeixs2' 0.4713 against 'wbeis2' 0.4420 ('wbeix' 0.4707 beat 'wbei'
# 0.4848), GRU 0.4803 against 0.4572 ('wbeix' 0.4855 against 'wbei' 0.4919), LSTM
# 50/1/1024/64 0.3851 against 0.2996 ('wbeix' 0.2706 against 'wbei' 0.2263); with FANOUT
# (9576ccc) 'wbeixs2' 0.4479 against 'wbeis2' 0.4400 at 1024/256; the tools' ``--settings``
# reach it (docs/lowbit.md).
# 'q' (layer 0's input codes written by the kernel, no quantizer launched before it; one
# direction) with each step's loads of x past its wait and its code stores past its signal,
# measured on an H100 80GB HBM3 against the same shape without it (tools/persistent_probe.py
# on tree 977f7b1 with --variants xq_after_signal+xq_after_wait, the kernel's placement
# since f9fccd3, no variant now; quick ranking replays of one process, ms): LSTM
# 50/1/1024/256 INT8 'wbeiqs2' 0.4143 against 'wbeis2' 0.4240, GRU 'wbeiq' 0.4220 against
# 'wbeis2' 0.4340, LSTM 50/1/1024/64 'wbeiq' 0.1929 against 'wbei' 0.1999, seed LSTM 0.0668
# against 0.0692; at f9fccd3 FP16 too (docs/lowbit.md). (Before, the loads
# before the wait and the stores before the signal, whose release then waited for them:
# 0.4573 against 0.4256 at 1024/256; the probe's xq_before_wait, xq_before_signal.) So
# 'wbeis2' and 'wbei' each come after their 'q' twin and are not tried once it verified and
# was timed, where the input is no wider than a layer above's (:func:`not_tried`). 'wbiq'
# likewise before 'wbi', for the single-gate cells, which take no 'e' (the same probe at
# 31c4cd5, an H100: seed RNN_TANH INT8 0.0713 against 0.0741, RNN_RELU 0.0711 against 0.0743;
# an LSTM's 'wbiq', 0.0777 against 'wbeiq''s 0.0679, is not tried once 'wbeiq' verified;
# where no 'e' shape of two slices plans, an LSTM or GRU below batch 32, 'wbiq' is tried and
# 'wbi' not: not measured there, where 'wb', still tried, was the fastest at batch 16).
# 'd' (the resident kernel, resident.py: one layer of at most 32 batch rows in one cluster a
# direction, weights in registers, h pushed through distributed shared memory) is for the
# small batches where the counters' round trip is the step (docs/lowbit.md); refused before
# any compile elsewhere (more layers, a larger batch, H that no cluster of 16 holds); tried
# before the 'g' shapes, the fallbacks at the list's end.
_BULK = dict(units=16, wg=True, bulk=True)
SETTINGS = (Settings(batch_slices=1), Settings(batch_slices=2), Settings(batch_slices=4),
            Settings(batch_slices=2, threads=512), Settings(batch_slices=2, units=16),
            Settings(batch_slices=2, reg_gates=True, input_inside=True, quantize=True, slab=2,
                     **_BULK),
            Settings(batch_slices=2, reg_gates=True, input_inside=True, slab=2, **_BULK),
            Settings(batch_slices=2, reg_gates=True, input_inside=True, quantize=True, **_BULK),
            Settings(batch_slices=2, reg_gates=True, input_inside=True, **_BULK),
            Settings(batch_slices=2, input_inside=True, quantize=True, **_BULK),
            Settings(batch_slices=2, input_inside=True, **_BULK),
            Settings(batch_slices=2, reg_gates=True, **_BULK), Settings(batch_slices=2, **_BULK),
            Settings(batch_slices=2, reg_gates=True, slab=2, **_BULK),
            Settings(batch_slices=1, reg_gates=True, slab=2, **_BULK), Settings(resident=True),
            Settings(batch_slices=2, gx_global=True, reg_gates=True, **_BULK),
            Settings(batch_slices=2, gx_global=True, **_BULK),
            Settings(batch_slices=1, gx_global=True, reg_gates=True, **_BULK),
            Settings(batch_slices=1, gx_global=True, **_BULK))


def not_tried(settings: Settings, verified, shapes, cfg=None) -> str | None:
    """Why the tuner, trying the launch ``shapes`` in turn, does not try ``settings`` once
    those ``verified`` of the same configuration have (None: it tries it). Of its own list
    (:data:`SETTINGS`), a 'g' shape is the fallback for where the staged input projection
    leaves bulk staging no room: not tried once a bulk shape with the projection staged has
    verified (where both fit, 'g' was 2-4 % slower); a bulk shape of one batch slice with the
    projection staged not once one of two alike in 'e' has (listed for where two leave no
    room: LSTM 50/1/2048/128 in 8 bits, and 'e' below batch 32, whose slices of two would
    have fewer than the 16 rows 'e' takes); a bulk
    shape without 'e' is not
    tried once its 'e' twin has (faster wherever both ran); and an 'e' shape without 'i'
    once its 'i' twin has (likewise), where ``cfg``'s input is no wider than a layer above's
    (as measured; a wider one makes every CTA multiply more slabs with 'i': its twins are
    tried too; None: not wider); a shape of smaller copies ('s') without 'i' once its twin
    of copies of 4 chunks, or that twin's 'i' twin, has (likewise); an 'i' shape without 'q'
    once its 'q' twin has, where the input is not wider (likewise; a 'q' shape verified
    stands for its twin without 'q' in the rules above: the same products). Any other list
    (the user's) is tried whole."""
    if tuple(shapes) != SETTINGS:
        return None
    staged = [s.name for s in verified if s.bulk and not s.gx_global]
    if settings.gx_global and staged:
        return (f"not tried: {staged[0]} verified, its input projection staged or "
                "multiplied in the kernel ('g' only where staging it leaves bulk staging no "
                "room)")
    if not settings.bulk:
        return None
    halves = [s.name for s in verified if s.bulk and not s.gx_global and s.batch_slices > 1
              and s.reg_gates == settings.reg_gates]
    if settings.batch_slices == 1 and not settings.gx_global and halves:
        return (f"not tried: {halves[0]} verified, bulk staging of two batch slices (one "
                "slice only where two leave no room)")
    wide = cfg is not None and cfg.input_size > cfg.dirs * cfg.hidden_size

    def seen(t):  # t verified, or its 'q' twin (the same products, its codes the kernel's)
        q = t and t.input_inside and not t.quantize and replace(t, quantize=True)
        return t if t in verified else q if q in verified else None
    e = replace(settings, reg_gates=True)  # its twin with 'e', and with 'e' and 'i'
    ei = None if settings.gx_global or wide else replace(e, input_inside=True)
    twin = seen(e) or seen(ei)
    if twin and not settings.reg_gates:
        return (f"not tried: {twin.name} verified, its gate math on the sums in registers "
                "('e', faster wherever both ran)")
    four = replace(settings, slab=0)  # its twin of copies of 4 chunks, and that one's 'i'
    fours = [seen(t) for t in (four, ei and replace(four, input_inside=True)) if seen(t)]
    if settings.slab and not settings.input_inside and fours:
        return (f"not tried: {fours[0].name} verified, copies of 4 chunks (faster than "
                f"{settings.name} wherever both ran)")
    if settings.reg_gates and not settings.input_inside and seen(ei):
        return (f"not tried: {seen(ei).name} verified, layer 0's input products in the "
                "kernel ('i', faster wherever both ran)")
    if seen(settings) not in (None, settings) and not wide:
        return (f"not tried: {seen(settings).name} verified, layer 0's input codes written "
                "by the kernel ('q', faster wherever both ran)")
    return None


def tried(settings: Settings, facts: dict, ms: float | None) -> dict:
    """A launch shape's entry in a record's ``settings_tried``: its outcome (NOT_TRIED with
    :func:`not_tried`'s reason where it was passed over), its quick time (None: not timed)
    and the reason it gave."""
    return {"settings": settings.name, "outcome": facts["outcome"], "ms": ms,
            "reason": facts.get("reason")}
