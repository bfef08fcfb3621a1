"""The shipped character model, run from a user's own PyTorch code, accelerated.

    python examples/charlm.py [--prompt TEXT] [--chars N] [--model lstm|gru]

Loads ``cudnn_rnn/data/charlm/lstm.npz`` (the character model ``make model`` trained on
Python's standard library) into three PyTorch modules (``torch.nn.Embedding``, the
``torch.nn.LSTM`` and a ``torch.nn.Linear`` decoder), accelerates the LSTM with
``cudnn_rnn.torch.accelerate`` twice, in FP8 and in the precision ``accelerate`` picks
itself ("auto": the fastest verified within its default tolerance), both on the held-out
batch the precision table measures (calibrated on its calibration slice), then for each of
the three (the original module and the two accelerated ones):

* generates text from a prompt, one character at a time (greedy), the RNN's state carried
  from call to call;
* prints its bits per character on the held-out batch (float64 decoder, as the precision
  table computes them) and its time per batch, eager and in a CUDA graph;
* for an accelerated one, beside it the precision table's row of the same configuration
  (engine, format, parts and calibration method: the record of the same id), or that the
  table has none.

The table is ``--table FILE`` (refused unless it is the table of the shipped model run),
else this GPU's committed one where there is one
(``results/<gpu>/<cudnn version>/precision.json``, ``precision-gru.json`` for the GRU).
With a table, 8 bits are tried only with the calibration methods the table ran the
persistent kernel with (the table picks a plan's method by bits per character, which a
module's tuner cannot compute: it keeps the method with the lowest output error). Where
the table ran every plan at one method, as the committed ones do, the configuration chosen
is then one it has a row of; where its parts differ in method, the choice may pair a part
with another part's method, and the line says the table has no such row.

Needs a CUDA GPU and PyTorch; without either it says so in one line (exit 2).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout

from cudnn_rnn import bindings, precision  # noqa: E402
from cudnn_rnn.charlm import corpus, network, statedict  # noqa: E402
from cudnn_rnn.charlm.table import CALIBRATION_BATCH, CALIBRATION_SEQ  # noqa: E402
from cudnn_rnn.engine import gpu  # noqa: E402
from cudnn_rnn.lowbit.calibration import METHODS  # noqa: E402

FP8_TOLERANCE = 6e-2  # FP8 E4M3 on both GEMMs: 5.0e-2 from FP32 on the H200 (precision.json)


def fail(text: str) -> int:
    print(f"examples/charlm.py: error: {text}", file=sys.stderr)
    return 2


def find_table(given: str | None, model: str) -> tuple[Path | None, dict | None]:
    """(path, records) of the table the example compares with: the file ``given`` (ValueError,
    what is wrong, if it is not a table of the shipped ``model``), else this GPU's committed
    one of ``model`` where there is one (none where cuDNN does not load: accelerate then
    says why)."""
    if given:
        return Path(given), table_records(Path(given), model)
    try:
        version = bindings.load().version_string
    except bindings.errors.LibraryNotFound:
        return None, None
    path = precision.shipped_table(ROOT / "results", model, gpu.device_info().get("gpu"),
                                   version)
    return (path, table_records(path)) if path.is_file() else (None, None)


def table_records(path: Path, model: str | None = None) -> dict:
    """A precision table's records by id; ValueError (what is wrong) if ``path`` is not
    one, or (``model``: "lstm" or "gru") not the table of that shipped character model (the
    model whose held-out figure the table recorded)."""
    try:
        result = json.loads(path.read_text())["result"]
        records = {r["id"]: r for r in result["records"]}
        source = result["source"]
        recorded = (source.get("recorded") or {}).get("bpc")
        name = str(source.get("name"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path} is not a precision table ({type(exc).__name__}: {exc}); "
                         f"give one written by python -m cudnn_rnn.precision") from None
    if model is not None and recorded != network.load(network.shipped(model)).meta[
            "heldout"]["bpc"]:
        other = next((m for m in ("lstm", "gru") if m != model and recorded == network.load(
            network.shipped(m)).meta["heldout"]["bpc"]), None)
        raise ValueError(f"{path} is the precision table of {name!r}, not of the shipped "
                         f"{model} model: give that model's table"
                         + (f" (or --model {other})" if other else ""))
    return records


def table_methods(records: dict, fmt: str | None = None) -> tuple | None:
    """The calibration methods of the table's verified 8-bit persistent rows (of ``fmt``;
    None: every format), in the table's order; None where it has none."""
    used = {r.get("calibration") for r in records.values() if r.get("engine") == "persistent"
            and r.get("format") and (fmt is None or r["format"] == fmt)
            and r.get("outcome") == "OK"}
    return tuple(m for m in METHODS if m in used) or None


def table_line(records: dict | None, path: Path | None, choice_id: str) -> str:
    """What the table says of the configuration ``choice_id``: its row's bits per
    character, or that it has none."""
    if records is None:
        return "   no precision table to compare with (--table FILE)"
    rec = records.get(choice_id)
    bpc = ((rec or {}).get("metrics") or {}).get("bpc")
    if bpc is None:
        return f"   the precision table ({path}) has no verified row {choice_id}"
    return f"   the precision table's row {choice_id} ({path}): {bpc:.4f} bits/char"


def torch_modules(model: network.CharLM, torch, device: str = "cuda"):
    """(embedding, rnn, decoder) as PyTorch modules holding the shipped weights, in eval
    mode on ``device``."""
    rnn = model.rnn
    kind = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU}[rnn.mode.name]
    extra = {"proj_size": rnn.proj} if rnn.proj != rnn.hidden else {}
    lstm = kind(rnn.input_size, rnn.hidden, rnn.layers, bidirectional=rnn.bidirectional, **extra)
    lstm.load_state_dict({k: torch.from_numpy(v) for k, v in statedict.to_state(rnn).items()})
    embedding = torch.nn.Embedding(model.vocab, rnn.input_size)
    embedding.weight.data = torch.from_numpy(model.embedding).float()
    decoder = torch.nn.Linear(model.decoder_w.shape[1], model.vocab)
    decoder.weight.data = torch.from_numpy(model.decoder_w).float()
    decoder.bias.data = torch.from_numpy(model.decoder_b).float()
    return [m.to(device).eval() for m in (embedding, lstm, decoder)]


def bits_per_char(rnn, embedding, decoder, codes, targets, torch) -> float:
    """Bits per character of the held-out batch: the RNN's outputs decoded in float64."""
    with torch.no_grad():
        y, _ = rnn(embedding(codes))
        logits = y.double() @ decoder.weight.double().T + decoder.bias.double()
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                targets.reshape(-1))
    return float(nll) / math.log(2.0)


def generate(rnn, embedding, decoder, prompt: str, n: int, torch) -> str:
    """``prompt`` and the ``n`` characters the model continues it with, greedily, the state
    carried from one call to the next (the prompt in one call, then one character each)."""
    codes = torch.as_tensor(corpus.encode(prompt), device="cuda").long()
    out, state = [], None
    with torch.no_grad():
        x = embedding(codes).unsqueeze(1)  # (seq, batch 1, input)
        for _ in range(n):
            y, state = rnn(x, state)
            nxt = int(decoder(y[-1, 0]).argmax())
            out.append(nxt)
            x = embedding(torch.tensor([[nxt]], device="cuda"))
    return prompt + corpus.decode(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("lstm", "gru"), default="lstm")
    p.add_argument("--prompt", default="def main(argv=None):\n    ")
    p.add_argument("--chars", type=int, default=160)
    p.add_argument("--table", help="a precision table (JSON) to compare with (default: this "
                   "GPU's committed one, where there is one)")
    args = p.parse_args(argv)
    try:
        import torch
        from cudnn_rnn.torch import NotAccelerated, accelerate
    except ImportError as exc:
        return fail(f"needs PyTorch ({exc}): pip install 'cudnn-rnn[torch]'")
    if not gpu.available() or not torch.cuda.is_available():
        return fail(f"needs a CUDA GPU: {gpu.unavailable_reason() or 'PyTorch sees none'}")
    try:
        path, records = find_table(args.table, args.model)
    except ValueError as exc:
        return fail(str(exc))
    model = network.load(network.shipped(args.model))
    embedding, rnn, decoder = torch_modules(model, torch)
    held_in, held_next = corpus.batch(network.slice_codes("heldout"), network.EVAL_SEQ,
                                      network.EVAL_BATCH)
    cal_in, _ = corpus.batch(network.slice_codes("calibration"), CALIBRATION_SEQ,
                             CALIBRATION_BATCH)
    codes = torch.as_tensor(held_in, device="cuda").long()
    targets = torch.as_tensor(held_next, device="cuda").long()
    with torch.no_grad():
        example, calibration = embedding(codes), embedding(torch.as_tensor(cal_in).cuda().long())
    runs = [("original (torch.nn)", rnn, None)]
    for name, asked, tol in (("FP8", "fp8", FP8_TOLERANCE), ("recommended", "auto", 1e-2)):
        methods = table_methods(records, "e4m3" if asked == "fp8" else None) \
            if records else None
        try:
            fast = accelerate(rnn, example, precision=asked, calibration=calibration,
                              tolerance=tol, methods=methods)
        except NotAccelerated as exc:
            print(f"{name}: not accelerated: {exc}")
            continue
        print(f"{name} ({asked}, tolerance {tol:g}): {fast.choice}\n")
        runs.append((name, fast, fast.plan.report["times"]))
    report(runs, embedding, decoder, codes, targets, args, model, torch, records, path)
    return 0


def report(runs, embedding, decoder, codes, targets, args, model, torch, records=None,
           path=None) -> None:
    """Each run's text, bits per character and times (the module's own from the first
    accelerated run's measurement, made beside it)."""
    module_times = next((t["module"] for _, _, t in runs if t), {})
    base_bpc = None
    for name, rnn, times in runs:
        bpc = bits_per_char(rnn, embedding, decoder, codes, targets, torch)
        base_bpc = bpc if base_bpc is None else base_bpc
        mine = module_times if times is None else times["accelerated"]
        timed = ", ".join(f"{how} {mine[how]['ms']:.4f} ms" if "ms" in mine.get(how, {})
                          else f"{how} {mine.get(how, {}).get('skipped', 'not timed')}"
                          for how in ("eager", "graph"))
        print(f"== {name}: {bpc:.4f} bits/char ({100 * (bpc - base_bpc) / base_bpc:+.4f} %), "
              f"held-out batch {network.EVAL_BATCH} x {network.EVAL_SEQ}: {timed}")
        if times is not None:
            print(table_line(records, path, rnn.plan.choice.id))
        print(generate(rnn, embedding, decoder, args.prompt, args.chars, torch))
        if times is not None:  # what ran at each shape: the batch, the prompt, one character
            for shape in rnn.shapes():
                print(f"   {shape['shape']}: {shape['runs']}")
        print()
    print(f"(the shipped {args.model} model's recorded float64 figure: "
          f"{model.meta['heldout']['bpc']:.4f} bits/char)")


if __name__ == "__main__":
    sys.exit(main())
