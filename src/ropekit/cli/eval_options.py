"""The options the evaluation commands share (``eval perplexity|passkey|tasks`` and ``report``), and the settings
built from them: every error names the option the user typed."""

from __future__ import annotations

from typing import Any

import typer

from ropekit import _defaults as defaults
from ropekit._costs import MAX_FACTOR
from ropekit.cli.common import check_range, fail, option_errors, parse_length, parse_list
from ropekit.cli.method_options import method_params, parse_methods
from ropekit.eval.run import PASSKEY_ONLY, PERPLEXITY_ONLY
from ropekit.eval.tasks.limits import MAX_SAMPLES

STRIDE_HELP = f"Sliding-window stride (--mode sliding only) [default: {defaults.PERPLEXITY_STRIDE}]."
MULTIPLES_HELP = "Lengths as multiples of the training length."


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
#: ``eval tasks --multiples``' default, as typed
DEFAULT_TASK_MULTIPLES = defaults.as_text(defaults.TASK_MULTIPLES)
#: files ``--out`` receives from an eval (refused without ``--force`` when present)
RESULT_FILES = ("results.json", "perplexity.csv", "passkey.csv")


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
    attention: str | None = None,
):
    """SweepSettings from CLI strings; ``names`` maps a setting to the option the user typed for it; ``params`` and
    ``attention``: the ``--param`` and ``--attention-param`` texts (:func:`ropekit.cli.method_options.method_params`)."""
    from ropekit.eval.perplexity import MODES
    from ropekit.eval.sweep import SweepSettings

    options = {field: "--" + field.replace("_", "-") for field in (*PERPLEXITY_ONLY, *PASSKEY_ONLY, "factor")}
    options |= (names or {}) | {"params": "--param"}
    if mode not in MODES:
        raise fail(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if stride is not None and mode != "sliding":
        raise fail(f"--stride applies only to --mode sliding (got --mode {mode}); leave it out")
    chosen = parse_methods(methods)
    given = method_params(params, attention, chosen)
    with option_errors(**options):
        return SweepSettings(
            methods=chosen,
            multiples=parse_list(multiples, options["multiples"]),
            passkey_multiples=parse_list(passkey_multiples, options["passkey_multiples"]),
            depths=parse_list(depths, options["depths"]),
            factor=parse_factor(factor),
            mode=mode,
            stride=defaults.PERPLEXITY_STRIDE if stride is None else stride,
            max_tokens=max_tokens,
            trials=trials,
            seed=seed,
            params=given,
        )


def build_task_settings(
    *,
    methods: str,
    tasks: str,
    multiples: str,
    lengths: str | None,
    samples: int,
    seed: int,
    depth: float | None,
    factor: str,
    threshold: float,
    params: dict[str, Any] | None = None,
    options: dict[str, str] | None = None,
):
    """TaskSettings from CLI strings; every error names its option (``options``: setting -> the option's name)."""
    names = {"samples": "--samples", "multiples": "--multiples", **(options or {})}
    from ropekit.eval.tasks.run import TaskSettings
    from ropekit.synthetic.suite import parse_tasks

    try:
        task_names = parse_tasks(tasks)
    except ValueError as error:
        raise fail(f"--tasks: {error}") from None
    token_lengths = None
    if lengths is not None:
        items = [item.strip() for item in lengths.split(",")]
        if not all(items):
            raise fail(f"--lengths must be a comma-separated list such as 4k,8k, got {lengths!r}")
        token_lengths = tuple(parse_length(item, "--lengths", minimum=2) for item in items)
    factors = parse_list(multiples, names["multiples"])
    for value in factors:
        check_range(names["multiples"], value, above=0.0)
    check_range(names["samples"], samples, minimum=1, maximum=MAX_SAMPLES)
    check_range("--seed", seed, minimum=0)
    if depth is not None:
        check_range("--depth", depth, minimum=0.0, maximum=1.0)
    check_range("--threshold", threshold, above=0.0, maximum=100.0)
    chosen = parse_methods(methods)
    with option_errors(params="--param"):  # TaskSettings checks --param against every listed method
        return TaskSettings(
            methods=chosen,
            tasks=task_names,
            multiples=factors,
            lengths=token_lengths,
            samples=samples,
            seed=seed,
            depth=depth,
            factor=parse_factor(factor),
            threshold=threshold,
            params=dict(params or {}),
        )
