"""The lm-eval tests' helpers: a byte-level BPE tokenizer and one that merges what ropekit joins, the CLI through
typer's runner, and an lm-eval run in this process that writes what ``lm_eval --log_samples`` writes (nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

runner = CliRunner()


def merging_tokenizer():
    """A byte-level BPE tokenizer (GPT-2's split rule) whose merges join a space to the next word (``" The"``), as
    real BPE tokenizers do: ropekit's samples, joined at spaces and newlines, re-tokenise exactly with it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from ropekit.synthetic.base import NOISE

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    backend.train_from_iterator(
        [NOISE * 20, "The magic number for kufi is 8918109. What is the magic number?"], trainer
    )
    backend.add_special_tokens(["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")


def spanning_tokenizer():
    """A SentencePiece-style BPE tokenizer (Llama-2's layout: spaces become ``▁``, no pre-tokenizer) whose merges
    span a space (``"e▁"``, ``".▁"``, learned from text not split at spaces, as SentencePiece's trainer never learns
    them): the text of ropekit's pieces, read whole, tokenizes otherwise."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast

    from ropekit.synthetic.base import NOISE

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=320, show_progress=False, special_tokens=["<unk>"])
    backend.train_from_iterator([NOISE * 20, "The magic number for kufi is 8918109.\nWhat is the number?"], trainer)
    backend.add_special_tokens(["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")


def cli(*args: str):
    """``ropekit ARGS`` through typer's runner."""
    return runner.invoke(app, [str(a) for a in args])


def run_lm_eval(
    model: Path, tasks: Path, out: Path, names: list[str], *, backend: str = "hf", args: str = "", gen_kwargs: str = ""
) -> dict:
    """lm-eval's ``backend`` over the task folder ``tasks``, in this process, its per-sample output written as
    ``lm_eval --log_samples --output_path out`` writes it; returns lm-eval's results. ``args``: the backend's
    ``--model_args`` (default, for ``hf``: ``model`` in float32 on the CPU); ``gen_kwargs``: lm-eval's
    ``--gen_kwargs`` (added to every task's generation options)."""
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    tracker = EvaluationTracker(output_path=str(out))
    results = lm_eval.simple_evaluate(
        model=backend,
        model_args=args or f"pretrained={model},dtype=float32,max_length=1024",
        tasks=names,
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False),
        batch_size=1,
        device="cpu",
        gen_kwargs=gen_kwargs or None,
        log_samples=True,
        evaluation_tracker=tracker,
    )
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)  # what lm_eval does: results_<date>.json
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    return {**results, "samples": samples}


def assert_same_as_ropekit(results: dict, out: Path, own) -> None:
    """lm-eval's scores (``results``, its run written to ``out``) are ``own``'s (a ropekit ``run_tasks`` result on the
    same samples) cell for cell, and ``ropekit eval effective-length out`` gives ``own``'s table and summary."""
    import json

    for row in own.rows:
        assert results["results"][f"ropekit_{row['task']}"][f"{row['length']},none"] == pytest.approx(row["score"])
    table = cli("eval", "effective-length", out, "--json")
    assert table.exit_code == 0, table.output
    data = json.loads(table.output)
    assert data["summary"] == own.to_dict()["summary"]
    assert [(r["task"], r["length"], r["score"]) for r in data["rows"]] == [
        (r["task"], r["length"], r["score"]) for r in own.rows
    ]
