"""A search on a model, end to end: load and check, build the samples, plan, search, score the best and every
formula on the held-out samples, and describe it all for ``search.json`` (:mod:`ropekit.search.result`)."""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ropekit.errors import InvalidArgument
from ropekit.search.evolve import SearchSettings, SearchTrace, run_search
from ropekit.search.journal import Journal
from ropekit.search.needles import HELDOUT_KINDS, SEARCH_KINDS
from ropekit.search.objective import (
    HELDOUT_STREAM,
    SEARCH_STREAM,
    SHORT_HELDOUT_STREAM,
    SHORT_RULE,
    SHORT_SEARCH_STREAM,
    NeedleSamples,
    ShortWindows,
    disjoint,
    floor_exceeds,
    longrope_of,
    needle_loss,
    needle_samples,
    short_change,
    short_term,
    short_windows,
)
from ropekit.search.request import EVALUATIONS, SearchRequest
from ropekit.search.space import Candidate, seed_candidates, theory_critical_pair

#: the formulas scored as their own methods beside the search (each with its own attention factor)
FORMULAS = ("none", "linear", "ntk", "yarn", "llama3", "self_extend")


@dataclass
class Prepared:
    """A loaded model with the search's samples and seeds."""

    request: SearchRequest
    model: Any
    original_length: int
    target_length: int
    factor: float
    search: NeedleSamples
    heldout: NeedleSamples
    seeds: dict[str, Candidate]
    text: dict[str, Any]
    identity: dict[str, str]
    batch_size: int | None = None
    #: plain-text windows of L0 tokens the short-length term is measured on (search), and reported on (held-out)
    short: ShortWindows | None = None
    heldout_short: ShortWindows | None = None
    #: per scored candidate (its key): the objective's parts, ``needle`` and ``short_change`` (nats)
    parts: dict[tuple, dict[str, float]] = field(default_factory=dict)

    def header(self) -> dict[str, Any]:
        """The journal's header (:mod:`ropekit.search.identity`): the model, the text and every setting that decides
        a candidate or its score."""
        from dataclasses import asdict

        from ropekit.search.space import Operators

        request = self.request
        settings = {
            "target_length": self.target_length,
            "samples": request.samples,
            "heldout_samples": request.heldout_samples,
            "seed": request.seed,
            "population": request.population,
            "parents": request.parents,
            "switch": request.switch,
            "dtype": request.dtype,
            "space": request.space,
            "short_tolerance": request.short_tolerance,
            "short_term": SHORT_RULE,
            "operators": asdict(Operators()),
        }
        return {"model": self.identity, "text": {"sha256": self.text["sha256"]}, "settings": settings}


def _check_model(request: SearchRequest) -> Callable[[Any], None]:
    def check(model: Any) -> None:
        position = getattr(getattr(getattr(model, "model", None), "config", None), "position", "rope")
        if position != "rope":
            raise InvalidArgument(
                "model", request.model, message=f"model {request.model!r} has no RoPE to search ({position} positions)"
            )
        target = request.target_for(model.train_length)
        if target <= model.train_length:
            message = f"target_length must be above the model's original length {model.train_length:,}, got {target:,}"
            raise InvalidArgument("target_length", target, message=message)

    return check


def prepare(request: SearchRequest, *, sharing: int = 1) -> Prepared:
    """Load the model (refusing one without RoPE and a target not above L0 before its weights load, and a device map
    for the tiny model before it loads), tokenize the text, build the search and held-out samples, fingerprint the
    model and plan the memory (:func:`ropekit.search.memory.rows_per_forward`; ``sharing``: the processes sharing
    this machine's memory), all before any forward pass.

    Raises:
        ValueError: a bad model, target or text, or a target that does not fit in memory (an
            :class:`~ropekit.errors.InvalidArgument` where it is about one).
    """
    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.text import read_text, shipped_text, tokenize
    from ropekit.search.identity import model_identity
    from ropekit.search.memory import rows_per_forward

    _check_device_map(request)
    load = {"dtype": request.dtype, "device_map": request.device_map, "before_weights": _check_model(request)}
    model = load_eval_model(request.model, **load)
    text = shipped_text() if request.text is None else read_text(request.text)
    tokens = tokenize(text, model.encode, model.separator)
    filler = tokens.ids.numpy()
    target = request.target_for(model.train_length)
    if len(filler) <= target:
        raise _short_text(request, tokens.source, len(filler), target)
    batch_size = rows_per_forward(model, request, target, sharing=sharing)

    def encode(data: bytes):
        return model.encode(data).numpy()

    common = {"seed": request.seed, "encode": encode}
    search = needle_samples(filler, target, request.samples, stream=SEARCH_STREAM, kinds=SEARCH_KINDS, **common)
    heldout = needle_samples(
        filler, target, request.heldout_samples, stream=HELDOUT_STREAM, kinds=HELDOUT_KINDS, **common
    )
    if not disjoint(search, heldout):
        raise InvalidArgument(
            "seed", request.seed, message="the search and held-out samples share a sample; use a longer text"
        )
    original = int(model.train_length)
    factor = target / original
    seeds = seed_candidates(model.rope, original, factor, request.space)
    identity = model_identity(request.model)
    windows = {"seed": request.seed, "model": model, "filler": filler, "length": original, "factor": factor}
    windows["batch_size"] = batch_size
    short = short_windows(count=request.samples, stream=SHORT_SEARCH_STREAM, **windows)
    heldout_short = short_windows(count=request.heldout_samples, stream=SHORT_HELDOUT_STREAM, **windows)
    described = tokens.describe()
    return Prepared(
        request,
        model,
        original,
        target,
        factor,
        search,
        heldout,
        seeds,
        described,
        identity,
        batch_size,
        short,
        heldout_short,
    )


def _check_device_map(request: SearchRequest) -> None:
    from ropekit._bundled import is_tiny_checkpoint

    if request.device_map is not None and is_tiny_checkpoint(request.model):
        message = lambda n: (  # noqa: E731
            f"{n('device_map')} applies to transformers models; the tiny model {request.model!r} runs on the CPU"
        )
        raise InvalidArgument("device_map", request.device_map, message=message, leads=True)


def _short_text(request: SearchRequest, source: str, tokens: int, target: int) -> InvalidArgument:
    """The refusal of a text too short for one sample, about the argument the caller gave: ``text`` when it named
    one, else the target length (the shipped text is what it is)."""
    if request.text is not None:
        message = f"text {source!r} has {tokens:,} tokens; a sample of {target:,} needs more"
        return InvalidArgument("text", request.text, message=message)
    argument, value = request.target_argument()
    return InvalidArgument(
        argument,
        value,
        message=lambda n: (
            f"{n(argument)} gives samples of {target:,} tokens, but the shipped held-out text has {tokens:,}: give "
            f"a shorter {n(argument)}, or a longer text with {n('text')}"
        ),
        leads=True,
    )


def score(prepared: Prepared, candidate: Candidate, samples: NeedleSamples) -> float:
    """The needle loss of ``candidate`` (as ``longrope``) on ``samples``."""
    spec = longrope_of(
        candidate.factors,
        original_length=prepared.original_length,
        factor=prepared.factor,
        switch=prepared.request.switch,
    )
    from ropekit.eval.model_support import is_out_of_memory

    try:
        return needle_loss(prepared.model, samples, spec, batch_size=prepared.batch_size)
    except (RuntimeError, MemoryError) as error:
        if not is_out_of_memory(error):
            raise
        rows = prepared.batch_size or len(samples.answer_lens)
        raise InvalidArgument(
            "batch_size",
            prepared.batch_size,
            message=lambda n: (
                f"out of memory scoring {rows} samples of {prepared.target_length:,} tokens in one forward; give a "
                f"smaller {n('batch_size')} (or a shorter {n('target_length')})"
            ),
            leads=False,
        ) from None


def objective(prepared: Prepared, candidate: Candidate) -> float:
    """What the search minimises: the needle loss on the search samples plus the short-length term
    (:func:`~ropekit.search.objective.short_term`) of the 1x change on the search windows; the parts are kept in
    ``prepared.parts``."""
    needle = score(prepared, candidate, prepared.search)
    spec = longrope_of(
        candidate.factors,
        original_length=prepared.original_length,
        factor=prepared.factor,
        switch=prepared.request.switch,
    )
    change = float(short_change(prepared.model, prepared.short, spec).mean())
    prepared.parts[candidate.key()] = {"needle": needle, "short_change": change}
    return needle + short_term(change, prepared.request.short_tolerance)


def peak_memory_bytes() -> int:
    """This process's peak memory: the accelerator's allocations when there is one, else resident memory."""
    import torch

    if torch.cuda.is_available() and torch.cuda.max_memory_allocated():
        return int(torch.cuda.max_memory_allocated())
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def plan(prepared: Prepared, recorded: dict[str, Any] | None = None, *, processes: int = 1) -> dict[str, Any]:
    """Time one candidate (the first seed on the search samples) and say what the budget buys.

    Args:
        recorded: the plan of the journal being resumed (:func:`planned_evaluations`).
        processes: how many processes share each generation and the final scores.
    """
    start = time.perf_counter()
    objective(prepared, next(iter(prepared.seeds.values())))
    seconds = time.perf_counter() - start
    request = prepared.request
    evaluations = planned_evaluations(request, seconds, recorded)
    extra = len(FORMULAS) + 1  # the formulas on both sets, the best on the held-out set
    return {
        "seconds_per_candidate": seconds,
        "evaluations": evaluations,
        "budget_seconds": request.budget_seconds,
        "estimated_seconds": seconds
        * (
            rounds(evaluations, request.population, len(prepared.seeds), processes)
            + math.ceil(extra / processes) * (1 + request.heldout_samples / request.samples)
        ),
        "processes": processes,
        "device_map": request.device_map,
        "peak_memory_bytes": peak_memory_bytes(),
        "batch_size": prepared.batch_size,
        "samples": request.samples,
        "heldout_samples": request.heldout_samples,
        "target_length": prepared.target_length,
        "original_length": prepared.original_length,
        "factor": prepared.factor,
        **short_floor(prepared),
    }


def rounds(evaluations: int, population: int, seeds: int, processes: int) -> int:
    """Candidates scored one after another in each process: per generation (the first holds the seeds and mutants up
    to ``population``, each later one ``population``), its share of the largest process."""
    count, size = 0, min(evaluations, max(population, seeds))
    while evaluations > 0:
        count += math.ceil(size / processes)
        evaluations -= size
        size = min(evaluations, population)
    return count


def planned_evaluations(request: SearchRequest, seconds: float, recorded: dict[str, Any] | None) -> int:
    """How many candidates the search scores: ``evaluations`` when given; for a time budget, the count the resumed
    journal recorded for the same budget (so a resumed search ends where the first would have), else the budget
    over ``seconds`` per candidate; by default :data:`~ropekit.search.request.EVALUATIONS`.

    A count other than the journal's is a search continued (or cut) to that count: its first candidates are the
    journal's whatever the count (:mod:`ropekit.search.evolve`), so the result is the one a fresh search of that
    count gives, and ``search.json`` records that count.
    """
    if request.evaluations is not None:
        return request.evaluations
    if request.budget_seconds is None:
        return EVALUATIONS
    count = (recorded or {}).get("evaluations")
    if (recorded or {}).get("budget_seconds") == request.budget_seconds and isinstance(count, int) and count >= 1:
        return count
    return max(1, math.floor(request.budget_seconds / seconds))


def short_floor(prepared: Prepared) -> dict[str, float | bool]:
    """The 1x perplexity change of longrope's attention factor alone (every factor 1) on the search windows, which
    every engine derives from s: no factor list costs less at L0 (``short_floor``); ``short_tolerance``, the total
    1x change a candidate may cost, the floor included; ``short_floor_exceeds``: the floor alone is over it, so no
    factor list of this s is within it and the search minimises the excess."""
    tolerance = prepared.request.short_tolerance
    return {
        "short_floor": math.expm1(prepared.short.floor),
        "short_tolerance": tolerance,
        "short_floor_exceeds": floor_exceeds(prepared.short.floor, tolerance),
    }


def formula_scores(prepared: Prepared, processes: Any = None) -> dict[str, dict[str, float | str]]:
    """Each formula of :data:`FORMULAS` as its own method (its own attention factor and attention), on both sets;
    a method the model cannot run is recorded with why. The formulas are shared among ``processes``
    (:mod:`ropekit.eval.parallel`; ``None``: this one), every process getting all of them."""
    from ropekit.eval.parallel import ONE_PROCESS

    def run(indices: list[int]) -> list[dict[str, float | str]]:
        return [_formula_score(prepared, FORMULAS[i]) for i in indices]

    return dict(zip(FORMULAS, (processes or ONE_PROCESS).map([1] * len(FORMULAS), run), strict=True))


def _formula_score(prepared: Prepared, method: str) -> dict[str, float | str]:
    from ropekit.eval.methods import configure, restore
    from ropekit.search.objective import sample_scores

    length, original = prepared.target_length, prepared.original_length
    try:
        configure(prepared.model, method, length=length, train_length=original, factor=prepared.factor, params={})
    except LookupError as error:
        return {"skipped": str(error)}
    try:
        return {
            name: float(sample_scores(prepared.model, samples, batch_size=prepared.batch_size)[0].mean())
            for name, samples in (("search", prepared.search), ("heldout", prepared.heldout))
        }
    finally:
        restore(prepared.model, method)


def execute(
    prepared: Prepared,
    evaluations: int,
    journal: Journal,
    *,
    progress: Callable[[int, float], None] | None = None,
    processes: Any = None,
) -> SearchTrace:
    """Run the search until ``evaluations`` candidates are scored, taking the scores ``journal`` holds; each
    generation shared among ``processes`` (:func:`~ropekit.search.evolve.run_search`)."""
    request = prepared.request
    settings = SearchSettings(
        evaluations=evaluations, population=request.population, parents=request.parents, seed=request.seed
    )
    return run_search(
        lambda c: objective(prepared, c),
        prepared.seeds,
        settings,
        factor=prepared.factor,
        journal=journal,
        progress=progress,
        processes=processes,
    )


def theory_pair(prepared: Prepared) -> int:
    return theory_critical_pair(prepared.model.rope, prepared.original_length)
