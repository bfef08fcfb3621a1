"""``python -m cudnn_rnn.example seqLength numLayers hiddenSize miniBatch mode [options]``

NVIDIA's RNN_example through ctypes: the same positional arguments (mode 0
RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU), the same initialisation (data 1.0, each
weight matrix 1/its element count, biases 1.0) and the same output: forward and
backward GFLOPS and the checksums of y, hy, cy, dx, dhx, dcx and dw, comparable
with the sample's published golden values.

FLOP count (the sample's): matrices-per-cell (2 RELU/TANH, 8 LSTM, 6 GRU) × 2 ×
directions × hidden² × seqLength × miniBatch × layers for the forward pass;
backward data and backward weights count the same each (the total counts twice).
Times are medians over ``--reps`` CUDA-event-timed calls after warm-up, not a
single call as in the sample, and only of outputs and gradients that matched the float64
reference first (``--no-verify``: the checksums alone, nothing timed).
"""
from __future__ import annotations

import argparse
import sys

from cudnn_rnn import bindings
from cudnn_rnn.bindings.enums import (DataType, DirectionMode, MathType, RNNAlgo, RNNBiasMode,
                            RNNDataLayout, RNNInputMode)

from cudnn_rnn.engine import gpu, timing
from cudnn_rnn.check.verify import compare
from cudnn_rnn.cli import BadInput, OneLineParser, enum_arg, positive_int, run_main
from cudnn_rnn.engine.config import SAMPLE_MODES, RNNConfig
from cudnn_rnn.matrix.loadable import library_survives
from cudnn_rnn.engine import readback
from cudnn_rnn.engine.flow import RNNFlow

USAGE = ("python -m cudnn_rnn.example seqLength numLayers hiddenSize miniBatch mode "
         "[--data-type FLOAT] [--math-prec P] [--math-type DEFAULT] [--algo STANDARD] "
         "[--bidirectional] ...")


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.example", usage=USAGE,
                      description="NVIDIA's RNN_example flow through ctypes over libcudnn.")
    p.add_argument("seq_length", type=positive_int, metavar="seqLength")
    p.add_argument("num_layers", type=positive_int, metavar="numLayers")
    p.add_argument("hidden_size", type=positive_int, metavar="hiddenSize")
    p.add_argument("mini_batch", type=positive_int, metavar="miniBatch")
    p.add_argument("mode", type=sample_mode, metavar="mode",
                   help="0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU (the number or the name)")
    p.add_argument("--data-type", type=enum_arg(DataType), default=DataType.FLOAT)
    p.add_argument("--math-prec", type=enum_arg(DataType), default=None,
                   help="default: FLOAT for HALF/BFLOAT16 data, else the data type")
    p.add_argument("--math-type", type=enum_arg(MathType), default=MathType.DEFAULT_MATH,
                   help="DEFAULT, TENSOR_OP, TENSOR_OP_ALLOW_CONVERSION or FMA")
    p.add_argument("--algo", type=enum_arg(RNNAlgo), default=RNNAlgo.STANDARD)
    p.add_argument("--bidirectional", action="store_true")
    p.add_argument("--input-mode", type=enum_arg(RNNInputMode), default=RNNInputMode.LINEAR_INPUT)
    p.add_argument("--bias-mode", type=enum_arg(RNNBiasMode), default=RNNBiasMode.DOUBLE_BIAS)
    p.add_argument("--proj-size", type=positive_int, default=None)
    p.add_argument("--input-size", type=positive_int, default=None)
    p.add_argument("--layout", type=enum_arg(RNNDataLayout), default=RNNDataLayout.SEQ_MAJOR_PACKED)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--reps", type=positive_int, default=10, help="timed repeats per call (median)")
    p.add_argument("--init", choices=("sample", "random"), default="sample")
    p.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="compare every output and gradient with the float64 reference before "
                        "timing (default); --no-verify: the checksums alone, nothing timed")
    p.add_argument("--cudnn", default=None, help="path of the libcudnn to load")
    return p


def sample_mode(text: str) -> int:
    """The sample's mode argument: 0-3, or the cell's name (LSTM, gru, RNN_RELU, ...)."""
    names = [m.name for m in SAMPLE_MODES]
    if text.upper() in names:
        return names.index(text.upper())
    if text.strip().isdigit() and int(text) < len(names):
        return int(text)
    raise argparse.ArgumentTypeError(
        f"mode is 0-3 or a name ({', '.join(f'{i} {n}' for i, n in enumerate(names))}), "
        f"got {text!r}")


def config_from_args(args) -> RNNConfig:
    try:
        return RNNConfig(
            seq_length=args.seq_length, num_layers=args.num_layers, hidden_size=args.hidden_size,
            mini_batch=args.mini_batch, mode=SAMPLE_MODES[args.mode], input_size=args.input_size,
            proj_size=args.proj_size, data_type=args.data_type, math_prec=args.math_prec,
            math_type=args.math_type, algo=args.algo,
            direction=DirectionMode.BIDIRECTIONAL if args.bidirectional else DirectionMode.UNIDIRECTIONAL,
            input_mode=args.input_mode, bias_mode=args.bias_mode, layout=args.layout,
            dropout=args.dropout)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def banner(cfg: RNNConfig, lib) -> list[str]:
    info = gpu.device_info()
    return [
        f"cuDNN {lib.version_string} from {lib.path} ({lib.source}); "
        f"GPU {info.get('gpu')} (compute capability {info.get('compute_capability')})",
        f"seqLength  = {cfg.seq_length}", f"numLayers  = {cfg.num_layers}",
        f"hiddenSize = {cfg.hidden_size}", f"inputSize  = {cfg.input_size}",
        f"projSize   = {cfg.proj_size}", f"miniBatch  = {cfg.mini_batch}",
        f"dropout    = {cfg.dropout:f}", f"direction  = CUDNN_{cfg.direction.name}",
        f"mode       = CUDNN_{cfg.mode.name}", f"algo       = CUDNN_RNN_ALGO_{cfg.algo.name}",
        f"dataType   = CUDNN_DATA_{cfg.data_type.name}",
        f"mathPrec   = CUDNN_DATA_{cfg.math_prec.name}",
        f"mathType   = CUDNN_{cfg.math_type.name}",
        f"inputMode  = CUDNN_{cfg.input_mode.name}", f"biasMode   = CUDNN_RNN_{cfg.bias_mode.name}",
        "",
    ]


def checksum_lines(cfg: RNNConfig, sums: dict) -> list[str]:
    """The sample's three checksum lines, with its spacing."""
    if cfg.has_cell_state:
        first = f"y checksum {sums['y']:E}     cy checksum {sums['cy']:E}     hy checksum {sums['hy']:E}"
        second = f"dx checksum {sums['dx']:E}    dcx checksum {sums['dcx']:E}    dhx checksum {sums['dhx']:E}"
    else:
        first = f"y checksum {sums['y']:E}     hy checksum {sums['hy']:E}"
        second = f"dx checksum {sums['dx']:E}    dhx checksum {sums['dhx']:E}"
    return [first, second, f"dw checksum {sums['dw']:E}"]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    library_survives(args.cudnn)  # a library that kills its loader: said in one line
    lib = bindings.load(args.cudnn)
    gpu.cupy_or_raise("the example")  # exit 2 with a clear line without a usable GPU
    out = sys.stdout
    for line in banner(cfg, lib):
        print(line, file=out)
    with RNNFlow(cfg, lib, device=True, init=args.init) as flow:
        result = flow.run()
        if result.failure is not None:
            f = result.failure
            print(f"stage {f.stage} failed: {f.call} returned CUDNN_STATUS_{f.status}"
                  f" ({f.code})" + (f": {f.reason}" if f.reason else ""), file=out)
            print(f"stages completed: {', '.join(result.reached) or 'none'}", file=out)
            return 1
        sums = readback.checksums(flow)
        verification, untimed = None, "--no-verify: times are printed for verified outputs only"
        if args.verify and cfg.dropout > 0 and cfg.num_layers > 1:
            untimed = ("the float64 reference has no dropout, so a training forward with "
                       "dropout between layers cannot be verified: times are printed for "
                       "verified outputs only (drop --dropout)")
        elif args.verify:
            verification = compare(cfg, flow.drawn, readback.outputs(flow))
            untimed = None if verification.passed else \
                "the outputs did not match the float64 reference"
        if untimed is None:
            cp, stream = flow.cp, flow.stream
            times = {
                "forward training": timing.time_call(
                    cp, stream, lambda: flow.forward(bindings.enums.ForwardMode.TRAINING),
                    args.reps),
                "backward data": timing.time_call(cp, stream, flow.backward_data, args.reps),
                "backward weights": timing.time_call(cp, stream, flow.backward_weights,
                                                     args.reps),
                "forward inference": timing.time_call(
                    cp, stream, lambda: flow.forward(bindings.enums.ForwardMode.INFERENCE),
                    args.reps)}
    flop = cfg.flop_count()
    gf = lambda f, ms: f / (1e6 * ms)  # noqa: E731 - the sample's GFLOPS
    if untimed is None:
        fwd, bwd_d, bwd_w = (times[k].median_ms for k in ("forward training", "backward data",
                                                          "backward weights"))
        print(f"Forward: {gf(flop, fwd):3.0f} GFLOPS", file=out)
        print(f"Backward: {gf(2 * flop, bwd_d + bwd_w):3.0f} GFLOPS, "
              f"({gf(flop, bwd_d):3.0f} GFLOPS), ({gf(flop, bwd_w):3.0f} GFLOPS)", file=out)
    for line in checksum_lines(cfg, sums):
        print(line, file=out)
    print("", file=out)
    print(f"FLOP per forward pass (sample formula) = {flop}", file=out)
    if untimed is None:
        for name, t in times.items():
            extra = (f"  ({gf(flop, t.median_ms):.0f} GFLOPS)"
                     if name == "forward inference" else "")
            print(f"{name + ':':19s}{t.describe()}{extra}", file=out)
    else:
        print(f"not timed: {untimed}", file=out)
    if result.notes:
        print("notes: " + "; ".join(result.notes), file=out)
    if verification is not None:
        errs = ", ".join(f"{k} {v:.2e}" for k, v in verification.errors.items())
        verdict = "PASS" if verification.passed else "FAIL " + ",".join(verification.failures)
        print(f"float64 reference: {verdict} (tolerance {verification.tolerance:.0e}, "
              f"gradients {verification.gradient_tolerance:.0e}): {errs}", file=out)
        return 0 if verification.passed else 1
    return 0


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.example")


if __name__ == "__main__":
    sys.exit(cli())
