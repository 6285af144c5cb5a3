"""``ropekit eval {perplexity,passkey,sweep}``: measurements on the bundled model or any local model.

Every option is checked before the model loads; the lengths, the methods that can run on the model and the output
folder are checked once it has loaded and before the sweep. A sweep that fails part-way keeps what it measured:
the methods finished before the failure are written to ``--out``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from ropekit import _defaults as defaults
from ropekit._costs import MAX_FACTOR
from ropekit.cli.common import (
    check_range,
    fail,
    json_option,
    name_option,
    option_errors,
    parse_list,
    prepare_output_dir,
    refuse_overwrite,
    write_and_print,
)
from ropekit.cli.engine_options import CONCURRENCY, ENGINE, URL
from ropekit.cli.method_options import METHODS, PARAM, attention_params, parse_methods

STRIDE_HELP = f"Sliding-window stride (--mode sliding only) [default: {defaults.PERPLEXITY_STRIDE}]."
MULTIPLES_HELP = "Lengths as multiples of the training length."

app = typer.Typer(help="Perplexity against length and passkey retrieval, per scaling method.", no_args_is_help=True)

MODEL = typer.Option(
    "tiny",
    help="'tiny' (bundled), a tiny checkpoint directory, a transformers model directory, or a .gguf file (dequantised).",
)
FACTOR = typer.Option("auto", help="'auto' (s = length / training length) or a number >= 1.")
DEVICE_MAP = typer.Option(
    None, help="transformers device_map, e.g. 'auto' (needs accelerate), for big transformers models only."
)
FORCE = typer.Option(False, "--force", metavar="", help="Overwrite results already in --out.")
DTYPE = typer.Option(
    "auto", help="auto (the checkpoint's own; float32 for the bundled model), bfloat16, float16, float32."
)
TEXT = typer.Option(
    None,
    help="Evaluation text: a UTF-8 file, a .jsonl file (a 'text' field per line) or a folder of them; documents are "
    "joined with the tokenizer's end-of-sequence token (default: the shipped held-out text).",
)
#: files ``--out`` receives from an eval (refused without ``--force`` when present)
RESULT_FILES = ("results.json", "perplexity.csv", "passkey.csv")
#: SweepSettings fields that only one kind of evaluation uses (left out of the other's recorded settings)
PERPLEXITY_ONLY = ("multiples", "mode", "stride", "max_tokens")
PASSKEY_ONLY = ("passkey_multiples", "depths", "trials", "seed")

#: the arguments the evaluation's messages name (an out-of-memory hint), as options
EVAL_HINTS = {"device_map": "--device-map", "model": "--model"}


def parse_factor(text: str) -> float | str:
    """'auto' or a finite number >= 1."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise fail(f"--factor must be 'auto' or a number >= 1, got {text!r}") from None
    check_range("--factor", value, minimum=1.0, maximum=MAX_FACTOR)
    return value


def build_settings(
    *,
    methods: str,
    multiples: str = "1",
    passkey_multiples: str = "1",
    depths: str = "0.5",
    factor: str = "auto",
    mode: str = "nonoverlap",
    stride: int | None = None,
    max_tokens: int = 16384,
    trials: int = 1,
    seed: int = 0,
    names: dict[str, str] | None = None,
    params: str | None = None,
):
    """SweepSettings from CLI strings; ``names`` maps a setting to the option the user typed for it."""
    from ropekit.eval.perplexity import MODES
    from ropekit.eval.sweep import SweepSettings

    options = {field: "--" + field.replace("_", "-") for field in (*PERPLEXITY_ONLY, *PASSKEY_ONLY, "factor")}
    options |= (names or {}) | {"params": "--param"}
    if mode not in MODES:
        raise fail(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if stride is not None and mode != "sliding":
        raise fail(f"--stride applies only to --mode sliding (got --mode {mode}); leave it out")
    with option_errors(**options):
        return SweepSettings(
            methods=parse_methods(methods),
            multiples=parse_list(multiples, options["multiples"]),
            passkey_multiples=parse_list(passkey_multiples, options["passkey_multiples"]),
            depths=parse_list(depths, options["depths"]),
            factor=parse_factor(factor),
            mode=mode,
            stride=defaults.PERPLEXITY_STRIDE if stride is None else stride,
            max_tokens=max_tokens,
            trials=trials,
            seed=seed,
            params=attention_params(params),
        )


def load_model(model: str, device_map: str | None, *, dtype: str = "auto", before_weights=None, engine=None):
    """The evaluation model, with clear errors for missing paths and unsupported architectures.

    ``before_weights`` runs once the tokenizer is ready and before a transformers model's weights load.
    ``engine``: ``(name, url, concurrency)`` of ``--engine`` (``None``: torch).
    """
    from ropekit.eval.models import DTYPES, load_eval_model

    if engine is not None and engine[0] != "torch":
        from ropekit.cli.engine_options import check_engine, load_engine_model

        check_engine(*engine, device_map=device_map, dtype=dtype)
        loaded = load_engine_model(engine[0], model, engine[1], engine[2])
        if before_weights is not None:
            try:
                before_weights(loaded)
            except ValueError as error:
                raise fail(f"--text: {error}") from error
        return loaded

    if dtype not in DTYPES:
        raise fail(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if device_map is not None and model == "tiny":
        raise fail("--device-map applies to transformers models; the bundled 'tiny' model runs on the CPU")
    try:
        loaded = load_eval_model(model, device_map=device_map, dtype=dtype, before_weights=before_weights)
    except (OSError, ValueError, TypeError) as error:  # OSError: transformers' "no weights in this directory"
        message = name_option(str(error), {"model": "--model"})  # ropekit's own checks name the model
        raise fail(message if message.startswith("--model") else f"--model {model!r}: {message}") from error
    if device_map is not None and loaded.describe().get("kind") == "ropekit-tiny":
        raise fail(f"--device-map applies to transformers models; --model {model!r} is a ropekit tiny checkpoint")
    return loaded


def check_runnable(model, settings, *, perplexity: bool, passkey: bool, names: dict[str, str], text=None) -> None:
    """Before the sweep: every length fits the evaluation text, and at least one method can run on ``model``."""
    from ropekit.eval.sweep import evaluation_text

    train_length = model.train_length
    if perplexity:
        tokens = len(evaluation_text(model, text)[0])
        for multiple in settings.multiples:
            length = int(multiple * train_length)
            if length < 2:
                raise fail(f"{names['multiples']} {multiple:g} gives length {length} (training length {train_length})")
            if length + 1 > tokens:
                raise fail(
                    f"{names['multiples']} {multiple:g} gives length {length:,}, but the evaluation text has "
                    f"{tokens:,} tokens (training length {train_length}; the largest multiple that fits is "
                    f"{(tokens - 1) // train_length})"
                )
    if passkey:
        for multiple in settings.passkey_multiples:
            if int(multiple * train_length) < 1:
                raise fail(f"{names['passkey_multiples']} {multiple:g} gives an empty context")
    lengths = settings.lengths(train_length, perplexity=perplexity, passkey=passkey)
    check_methods_run(model, settings.methods, settings.factor, max(lengths))


def check_methods_run(model, methods, factor, longest: int) -> None:
    """At least one of ``methods`` can run on ``model`` (a model without RoPE runs only ``none``), and none is
    out of range at the ``longest`` length; else the one-line ``--methods`` error."""
    from ropekit.eval.methods import factor_for, scaling_for

    skipped = {}
    for method in methods:
        try:
            scaling_for(
                method,
                factor=factor_for(longest, model.train_length, factor),
                train_length=model.train_length,
                native=model.native_scaling,
            )
        except LookupError as error:
            skipped[method] = str(error)
        except ValueError as error:
            raise fail(f"--methods {method}: {error}") from error
    if len(skipped) == len(methods):
        reasons = "; ".join(f"{m}: {why}" for m, why in skipped.items())
        raise fail(f"--methods: none of the methods can run on this model ({reasons})")


def run_with_progress(
    model, settings, *, perplexity: bool, passkey: bool, out: Path | None = None, text=None, force: bool = False
):
    """run_sweep per method under a rich progress bar (on stderr, so ``--json`` on stdout stays valid JSON).

    A failure part-way writes the methods already measured to ``out`` (when given; existing files replaced only with
    ``force``) before the error.
    """
    from rich.console import Console

    from ropekit._progress import progress_bar
    from ropekit.eval.sweep import SweepResult, cost_lines, evaluation_text, forward_tokens, run_sweep

    console = Console(stderr=True)
    text_tokens = len(evaluation_text(model, text)[0])
    for line in cost_lines(model, settings, text_tokens, perplexity=perplexity, passkey=passkey):
        console.print(line, highlight=False)
    merged: SweepResult | None = None
    # progress in forward tokens, so the ETA weighs a 32k window 4x an 8k one (and more for attention)
    with progress_bar("eval") as bar:
        cost = forward_tokens(settings, model.train_length, text_tokens, perplexity=perplexity, passkey=passkey)
        task = bar.add_task("", total=max(1, sum(cost.values())))
        for method in settings.methods:
            try:
                part = run_sweep(
                    model,
                    dataclasses.replace(settings, methods=(method,)),
                    perplexity=perplexity,
                    passkey=passkey,
                    text=text,
                    on_step=lambda label: bar.update(task, description=label),
                    on_tokens=lambda tokens: bar.update(task, advance=tokens),
                )
            except (ValueError, MemoryError, RuntimeError) as error:
                kept = ""
                if merged is not None and out is not None:
                    merged.context["partial"] = True
                    kept = _keep_partial(merged, out, force)
                raise fail(
                    f"evaluation failed at --methods {method}: {name_option(str(error), EVAL_HINTS)}{kept}"
                ) from error
            if merged is None:
                merged = part
            else:
                merged.perplexity += part.perplexity
                merged.passkey += part.passkey
                merged.skipped += part.skipped
    unused = PASSKEY_ONLY if not passkey else PERPLEXITY_ONLY if not perplexity else ()
    merged.context["settings"] = {k: v for k, v in settings.to_dict().items() if k not in unused}
    return merged


def _keep_partial(result, out: Path, force: bool) -> str:
    """Write the methods measured before a failure to ``out`` (the staged writer); what to add to the error."""
    from ropekit._output import staged_output

    try:
        with staged_output(out, force=force) as staged:
            result.write(staged)
    except OSError as error:
        return f"; the methods measured before it were not kept ({error})"
    return f"; the methods measured before it are in {str(out / 'results.json')!r}"


def print_tables(result) -> None:
    """Rich tables of perplexity (all scored tokens, and those beyond the training length) and passkey accuracy."""
    from rich.console import Console
    from rich.table import Table

    from ropekit.eval.report import perplexity_matrix

    console = Console()
    if result.perplexity:
        titles = {"perplexity": "perplexity by length (all scored tokens)"}
        if any(r.get("beyond") is not None for r in result.perplexity):
            titles["beyond"] = "perplexity of the tokens beyond the training length"
        for key, title in titles.items():
            cols, rows = perplexity_matrix(result.perplexity, key)
            table = Table(title=title)
            for c in cols:
                table.add_column(c, justify="right")
            for r in rows:
                table.add_row(
                    *[f"{r.get(c):.3g}" if isinstance(r.get(c), float) else str(r.get(c) or "—") for c in cols]
                )
            console.print(table)
    if result.passkey:
        acc = {}
        for r in result.passkey:
            acc.setdefault(r["method"], {}).setdefault(r["length"], []).append(r["accuracy"])
        lengths = sorted({r["length"] for r in result.passkey})
        table = Table(title="passkey accuracy (mean over depths)")
        table.add_column("method")
        for n in lengths:
            table.add_column(str(n), justify="right")
        for method, by_length in acc.items():
            table.add_row(
                method, *[f"{sum(by_length[n]) / len(by_length[n]):.0%}" if n in by_length else "" for n in lengths]
            )
        console.print(table)
    for row in result.skipped:
        console.print(f"skipped {row['method']}: {row['reason']}", highlight=False)


def read_sweep_text(text: Path | None, settings, *, perplexity: bool, passkey: bool):
    """``--text`` read and checked (missing, empty, binary) before any model loads; its length is checked against
    the lengths asked for once the tokenizer is known, before a transformers model's weights load."""
    from ropekit.eval.sweep import SweepText

    try:
        return SweepText(text, settings, perplexity=perplexity, passkey=passkey)
    except (OSError, ValueError) as error:
        raise fail(f"--text: {error}") from error


def _evaluate(
    *,
    model: str,
    settings,
    out: Path | None,
    force: bool,
    json_output: bool,
    device_map: str | None,
    perplexity: bool,
    passkey: bool,
    names: dict[str, str],
    dtype: str = "auto",
    text: Path | None = None,
    engine: tuple[str, str | None, int] | None = None,
) -> None:
    if engine is not None:
        from ropekit.cli.engine_options import check_engine

        check_engine(*engine, device_map=device_map, dtype=dtype)
    if out is not None:  # before loading: a bad folder fails in a second, not after the sweep
        written = ("results.json", *(("perplexity.csv",) if perplexity else ()), *(("passkey.csv",) if passkey else ()))
        refuse_overwrite(out, written, "--out", force=force)
        prepare_output_dir(out, "--out", create=False)
    sweep_text = read_sweep_text(text, settings, perplexity=perplexity, passkey=passkey)
    eval_model = load_model(model, device_map, dtype=dtype, before_weights=sweep_text.check, engine=engine)
    tokens = sweep_text.tokenized(eval_model)
    check_runnable(eval_model, settings, perplexity=perplexity, passkey=passkey, names=names, text=tokens)
    if out is not None:
        prepare_output_dir(out, "--out")
    result = run_with_progress(
        eval_model, settings, perplexity=perplexity, passkey=passkey, out=out, text=tokens, force=force
    )
    write_and_print(result, out, json_output, print_tables, force=force)


@app.command("perplexity")
def perplexity_command(
    model: str = MODEL,
    methods: str = METHODS,
    multiples: str = typer.Option(defaults.as_text(defaults.PERPLEXITY_MULTIPLES), help=MULTIPLES_HELP),
    factor: str = FACTOR,
    mode: str = typer.Option(defaults.PERPLEXITY_MODE, help="nonoverlap (PI paper) or sliding (YaRN paper)."),
    stride: int | None = typer.Option(None, help=STRIDE_HELP),
    max_tokens: int = typer.Option(defaults.PERPLEXITY_MAX_TOKENS, help="Tokens scored per length."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write results.json and perplexity.csv here."),
    force: bool = FORCE,
    json_output: bool = json_option("Print JSON (rows carry inside/beyond-training-length perplexity)."),
    device_map: str | None = DEVICE_MAP,
    dtype: str = DTYPE,
    text: Path | None = TEXT,
    param: str | None = PARAM,
    engine: str = ENGINE,
    url: str | None = URL,
    concurrency: int = CONCURRENCY,
) -> None:
    """Perplexity against length per method: over all scored tokens and over those beyond the training length."""
    settings = build_settings(
        methods=methods,
        multiples=multiples,
        factor=factor,
        mode=mode,
        stride=stride,
        max_tokens=max_tokens,
        params=param,
    )
    _evaluate(
        model=model,
        settings=settings,
        out=out,
        force=force,
        json_output=json_output,
        device_map=device_map,
        perplexity=True,
        passkey=False,
        dtype=dtype,
        text=text,
        engine=(engine, url, concurrency),
        names={"multiples": "--multiples"},
    )


@app.command("passkey")
def passkey_command(
    model: str = MODEL,
    methods: str = METHODS,
    multiples: str = typer.Option(defaults.as_text(defaults.PASSKEY_MULTIPLES), help=MULTIPLES_HELP),
    depths: str = typer.Option(defaults.as_text(defaults.PASSKEY_DEPTHS), help="Needle depths (0 = start)."),
    trials: int = typer.Option(defaults.PASSKEY_TRIALS, help="Trials per (length, depth) cell."),
    seed: int = typer.Option(0, help="Seed of the episodes."),
    factor: str = FACTOR,
    out: Path | None = typer.Option(None, "--out", "-o", help="Write results.json and passkey.csv here."),
    force: bool = FORCE,
    json_output: bool = json_option("Print JSON."),
    device_map: str | None = DEVICE_MAP,
    dtype: str = DTYPE,
    text: Path | None = TEXT,
    param: str | None = PARAM,
    engine: str = ENGINE,
    url: str | None = URL,
    concurrency: int = CONCURRENCY,
) -> None:
    """Passkey retrieval accuracy over lengths × needle depths per method."""
    settings = build_settings(
        params=param,
        methods=methods,
        passkey_multiples=multiples,
        depths=depths,
        factor=factor,
        trials=trials,
        seed=seed,
        names={"passkey_multiples": "--multiples"},
    )
    _evaluate(
        model=model,
        settings=settings,
        out=out,
        force=force,
        json_output=json_output,
        device_map=device_map,
        perplexity=False,
        passkey=True,
        dtype=dtype,
        text=text,
        engine=(engine, url, concurrency),
        names={"passkey_multiples": "--multiples"},
    )
