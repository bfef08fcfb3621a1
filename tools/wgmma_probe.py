"""Hopper's warpgroup MMA against the persistent kernel's mma.sync, at the persistent kernel's
shapes: is the operand layout right, and how long does one step's product take?

    python tools/wgmma_probe.py --out DIR [--formats fp16,bf16,int8,e4m3] [--widths 8,16,32,64]
        [--kbytes 512,1024] [--steps 16]

First the conventions: at N 32 and 512 bytes of K, each format's wgmma with A from shared
memory and from registers, in both canonical layouts (``cudnn_rnn.lowbit.wgmma.strides``),
with the descriptor's two strides as the PTX ISA assigns them and swapped; every step's sums
are checked against numpy (int8 exactly; the floats within their accumulation's rounding of
the sum of |a b|). Then the sweep, with the first assignment that verified: every format,
width N (the batch rows of a CTA's state) and K, mma.sync (the kernel's path: ldmatrix
fragments, each warp 16 rows by every n-tile over all of K) against wgmma with A from shared
memory and from registers, one warpgroup a CTA on every multiprocessor, a fresh B staged
every step as the kernel stages the state. Per step, by thread 0's clock: the staging (B from
L2 into shared memory, cp.async) and the product (from the staged B to the sums in
registers), medians over CTAs and steps after the first, in cycles and in ns at the SM
clock the driver reports. ``wgmma_regs_bulk`` stages B as one bulk copy (the copy engine,
an mbarrier) from a B already laid out canonically in global memory, as a producer could
write the kernel's state, against every thread's 16-byte copies.

A diagnostic for the persistent kernel's next product path (not part of the package); it
compiles for sm_90a, so it runs on Hopper GPUs only.
"""
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from cudnn_rnn.cli import BadInput, OneLineParser
from cudnn_rnn.lowbit import persistent, quant, rates, wgmma
from cudnn_rnn.lowbit.cubin import compile_source
from cudnn_rnn.matrix.runs import refuse_output

KERNEL = Path(__file__).with_name("wgmma_probe.cu")
# path -> (MODE, BULK): how the product is made and how B is staged
MODES = {"mma": (0, 0), "wgmma_smem": (1, 0), "wgmma_regs": (2, 0), "wgmma_regs_bulk": (2, 1)}
FMT_CODE = {"fp16": 0, "bf16": 1, "int8": 2, "e4m3": 3}
PRECISION = {"fp16": "fp16", "bf16": "bf16", "int8": "int8", "e4m3": "fp8"}  # rates.operand's
# how far a float format's sums may be from float64's, as a share of sum |a b|, for the
# layout to count as right: FP32 accumulation for 16 bits; Hopper's FP8 tensor cores keep
# fewer bits of a running sum (a wrong layout is off by the order of the sums themselves;
# the error itself is reported, for what the accumulation costs)
TOLERANCE = {"fp16": 1e-4, "bf16": 1e-4, "int8": 0.0, "e4m3": 2e-2}
MAX_AREG_KBYTES = 512  # A from registers: KB / 32 chunks of 4 registers (64 at 512 bytes)
SLACK = 16384


def source(fmt: str, n: int, kbytes: int, steps: int, mode: str, layout: str,
           swapped: bool) -> str:
    """The probe kernel's CUDA source for one configuration."""
    consts = {"FMT": FMT_CODE[fmt], "NB": n, "KB": kbytes, "STEPS": steps,
              "MODE": MODES[mode][0], "BULK": MODES[mode][1],
              "LAYOUT": int(layout == "rows"), "SWAP": int(swapped)}
    head = "".join(f"#define {k} {v}\n" for k, v in consts.items())
    return (head + persistent.HELPERS.read_text() + wgmma.source(fmt, n)
            + KERNEL.read_text())


def values(fmt: str, codes: np.ndarray) -> np.ndarray:
    """The float64 values of operand codes of ``fmt`` (as ``rates.operand`` makes them)."""
    if fmt == "fp16":
        return codes.astype(np.float64)
    if fmt == "bf16":
        return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if fmt == "int8":
        return codes.astype(np.float64)
    return quant.decode_e4m3(codes).astype(np.float64)


def operands(fmt: str, n: int, kbytes: int, steps: int, seed: int = 0):
    """(A codes 64 x K, B codes steps x n x K, both as bytes row-major; the exact sums
    steps x 64 x n in float64; sum |a b|, the same shape)."""
    rng = np.random.default_rng(seed)
    k = kbytes // (2 if fmt in ("fp16", "bf16") else 1)
    a = rates.operand(np, rng, (64, k), PRECISION[fmt])
    b = rates.operand(np, rng, (steps, n, k), PRECISION[fmt])
    av, bv = values(fmt, a), values(fmt, b)
    want = np.einsum("mk,snk->smn", av, bv)
    scale = np.einsum("mk,snk->smn", np.abs(av), np.abs(bv))
    return (np.ascontiguousarray(a).view(np.uint8).reshape(64, kbytes),
            np.ascontiguousarray(b).view(np.uint8).reshape(steps, n, kbytes), want, scale)


def run(cp, fmt: str, n: int, kbytes: int, steps: int, mode: str, layout: str, swapped: bool,
        cubin: bytes, clock_khz: int) -> dict:
    """One configuration launched on every multiprocessor: its largest error (a share of
    sum |a b|; int8: the count of wrong sums) and its phases per step."""
    a, b, want, scale = operands(fmt, n, kbytes, steps)
    if MODES[mode][1]:  # a bulk copy stages B as it lies: lay each step's out canonically
        b = np.stack([wgmma.pack(b[s], "k").reshape(n, kbytes) for s in range(steps)])
    ctas = cp.cuda.Device().attributes["MultiProcessorCount"]
    acc = np.int32 if fmt == "int8" else np.float32
    da, db = cp.asarray(a), cp.asarray(b)
    out = cp.zeros((steps, 64, n), acc)
    trace = cp.zeros((ctas, steps, 3), cp.int64)
    module = cp.cuda.function.Module()
    module.load(cubin)
    fn = module.get_function("wgmma_probe")
    # the operands, and room past them: a descriptor whose strides are read in each other's
    # fields (the conventions' wrong half) reaches up to 7 x 1024 bytes beyond its operand,
    # which must stay in the allocation or the launch faults and ends the process's context
    smem = (64 + n) * (kbytes + 16) + SLACK
    cp.cuda.driver.funcSetAttribute(fn.ptr, cp.cuda.driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    smem)
    fn((ctas,), (128,), (da, db, out, trace), shared_mem=smem)
    cp.cuda.Stream.null.synchronize()
    got = out.get().astype(np.float64)
    if fmt == "int8":
        error = float(np.count_nonzero(got != want))
    else:
        error = float(np.max(np.abs(got - want) / np.maximum(scale, 1e-30)))
    t = trace.get()[:, 1:, :].astype(np.float64)  # the first step warms the caches
    stage, product = (t[..., 1] - t[..., 0]).ravel(), (t[..., 2] - t[..., 1]).ravel()
    phases = {}
    for name, cycles in (("stage", stage), ("product", product)):
        q1, med, q3 = np.percentile(cycles, [25, 50, 75])
        phases[name] = {"cycles": float(med), "cycles_q1": float(q1), "cycles_q3": float(q3),
                        "ns": float(med * 1e6 / clock_khz) if clock_khz else float("nan")}
    return {"format": fmt, "n": n, "kbytes": kbytes, "mode": mode, "layout": layout,
            "swapped": swapped, "error": error, "verified": error <= TOLERANCE[fmt],
            "phases": phases}


def main() -> int:
    p = OneLineParser()
    p.add_argument("--out", required=True)
    p.add_argument("--formats", default="fp16,bf16,int8,e4m3")
    p.add_argument("--widths", default="8,16,32,64")
    p.add_argument("--kbytes", default="512,1024")
    p.add_argument("--steps", default="16")
    a = p.parse_args()
    formats = [f for f in a.formats.split(",") if f]
    if not formats or set(formats) - set(FMT_CODE):
        p.error(f"--formats takes {','.join(FMT_CODE)}, comma-separated")
    try:
        widths = [int(v) for v in a.widths.split(",")]
        kbytes = [int(v) for v in a.kbytes.split(",")]
        steps = int(a.steps)
    except ValueError:
        p.error("--widths, --kbytes and --steps take whole numbers (comma-separated)")
    if any(w not in wgmma.widths(f) or w > 64 for w in widths for f in formats):
        p.error("--widths: multiples of 8 up to 64, the batch rows of a CTA's state (with "
                "int8: 8, 16, 24, 32, 48 or 64, the widths its wgmma takes)")
    if any(k % wgmma.K_BYTES or not 32 <= k <= 1024 for k in kbytes):
        p.error(f"--kbytes: multiples of {wgmma.K_BYTES} from 32 to 1024")
    if not 2 <= steps <= 256:
        p.error("--steps: 2 to 256 (the first is left out of the phases)")
    refuse_output(a.out)
    from cudnn_rnn.engine.gpu import NoGPU, cupy_or_raise
    try:
        cp = cupy_or_raise()
    except NoGPU as exc:
        p.error(f"{exc}; run it on a Hopper GPU")
    cc = cp.cuda.Device().compute_capability
    if cc != "90":
        p.error(f"this GPU is compute capability {cc[:-1]}.{cc[-1]}: wgmma needs sm_90a "
                "(H100, H200)")
    clock_khz = cp.cuda.Device().attributes.get("ClockRate")  # None: cycles only
    started = time.monotonic()
    conventions = [(f, 32, 512, m, lay, sw) for f in formats
                   for m in ("wgmma_smem", "wgmma_regs") for lay in ("k", "rows")
                   for sw in (False, True)]
    results = {"conventions": _runs(cp, conventions, steps, clock_khz)}
    right = [r for r in results["conventions"] if r["verified"] and r["layout"] == "k"]
    layout, swapped = ("k", right[0]["swapped"]) if right else (None, None)
    for r in results["conventions"]:
        print(f"convention {r['format']:5s} {r['mode']:10s} layout {r['layout']:4s} "
              f"{'swapped' if r['swapped'] else 'as PTX':7s}: "
              f"{'verified' if r['verified'] else 'WRONG'} (error {r['error']:.3g})"
              + (f" {(r.get('compile_error') or r.get('launch_error'))[:200]}"
                 if "phases" not in r else ""))
    sweep = [(f, n, k, m, layout or "k", bool(swapped)) for f in formats for n in widths
             for k in kbytes for m in MODES
             if (m == "mma" or layout) and not (m.startswith("wgmma_regs")
                                                and k > MAX_AREG_KBYTES)]
    results["sweep"] = _runs(cp, sweep, steps, clock_khz)
    print(f"\n{'format':6s} {'N':>3s} {'K B':>5s} {'path':10s} {'ok':3s} "
          f"{'stage cyc':>9s} {'product cyc (IQR)':>22s} {'product ns':>10s}")
    for r in results["sweep"]:
        if "phases" not in r:
            print(f"{r['format']:6s} {r['n']:3d} {r['kbytes']:5d} {r['mode']:10s} not run: "
                  + (r.get("compile_error") or r.get("launch_error", ""))[:200])
            continue
        st, pr = r["phases"]["stage"], r["phases"]["product"]
        print(f"{r['format']:6s} {r['n']:3d} {r['kbytes']:5d} {r['mode']:10s} "
              f"{'yes' if r['verified'] else 'NO':3s} {st['cycles']:9.0f} "
              f"{pr['cycles']:8.0f} ({pr['cycles_q1']:.0f}-{pr['cycles_q3']:.0f}) "
              f"{pr['ns']:10.0f}")
    results.update({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                    "clock_khz": clock_khz, "command": " ".join(sys.argv),
                    "wall_s": round(time.monotonic() - started, 1)})
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "wgmma_probe.json").write_text(json.dumps(results, indent=1))
    return 0


def _runs(cp, configs: list, steps: int, clock_khz: int) -> list:
    """Each configuration compiled (side by side: NVRTC releases the GIL) and run in turn;
    one that does not compile is a record with NVRTC's reason."""
    texts = [source(f, n, k, steps, m, lay, sw) for f, n, k, m, lay, sw in configs]
    with ThreadPoolExecutor(8) as pool:
        cubins = list(pool.map(_compiled, texts))
    out = []
    for (f, n, k, m, lay, sw), cubin in zip(configs, cubins):
        if isinstance(cubin, str):
            out.append(_failed((f, n, k, m, lay, sw), "compile_error", cubin[:2000]))
            continue
        try:
            out.append(run(cp, f, n, k, steps, m, lay, sw, cubin, clock_khz))
        except Exception as exc:  # a fault ends the context: what ran so far is kept
            out.append(_failed((f, n, k, m, lay, sw), "launch_error",
                               f"{type(exc).__name__}: {exc}"))
            print(f"wgmma_probe.py: {f} N {n} K {k} {m} {lay} swapped={sw}: {exc}; "
                  "the runs after it are not made", file=sys.stderr)
            break
    return out


def _failed(config: tuple, key: str, text: str) -> dict:
    """The record of a configuration that did not compile or whose launch failed."""
    f, n, k, m, lay, sw = config
    return {"format": f, "n": n, "kbytes": k, "mode": m, "layout": lay, "swapped": sw,
            "verified": False, "error": float("nan"), key: text}


def _compiled(text: str):
    """The cubin for sm_90a (CuPy's RawModule would compile for plain sm_90), or NVRTC's
    reason."""
    try:
        return compile_source(text, "wgmma_probe.cu", "sm_90a")
    except RuntimeError as exc:
        return str(exc)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BadInput as exc:  # one line, exit 2: what to give instead
        print(f"wgmma_probe.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
